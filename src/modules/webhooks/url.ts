import { BlockList, isIP } from "node:net";
import { invalidField } from "../../errors.ts";

/**
 * Where Emisor may send webhooks. Outside sandbox: https only, and never to a loopback, private,
 * link-local or unspecified address named literally (a receiver must be reachable from the
 * internet, and Emisor must not be turned against its own network). In sandbox mode also
 * http://localhost and http://127.0.0.1 on any port, so a developer can receive on a laptop.
 * A DNS name is checked when it is called: the worker resolves it once, refuses a local or private
 * address, and connects to the addresses it checked (`post.ts`).
 */
const localAddresses = new BlockList();
for (const [network, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.168.0.0", 16],
  // Not the internet either (RFC 6890): IETF protocol assignments, the documentation and
  // benchmarking networks, multicast, and the reserved block with the broadcast address.
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  localAddresses.addSubnet(network, prefix, "ipv4");
}
for (const [network, prefix] of [
  // The unspecified and loopback addresses, and the deprecated IPv4-compatible form (::7f00:1 is
  // 127.0.0.1) with them.
  ["::", 96],
  // NAT64 (64:ff9b::7f00:1 reaches 127.0.0.1 through a translator), discard, documentation.
  ["64:ff9b::", 96],
  ["64:ff9b:1::", 48],
  ["100::", 64],
  // IETF protocol assignments, Teredo (2001::/32) among them, and 6to4 (2002::/16): both carry an
  // IPv4 address inside (2002:a9fe:a9fe:: is 169.254.169.254), and a relay would deliver there.
  ["2001::", 23],
  ["2002::", 16],
  ["2001:db8::", 32],
  ["fc00::", 7],
  ["fe80::", 10],
  // Site-local (deprecated, still routed inside some networks) and multicast.
  ["fec0::", 10],
  ["ff00::", 8],
] as const) {
  localAddresses.addSubnet(network, prefix, "ipv6");
}

const sandboxHttpHosts = new Set(["localhost", "127.0.0.1"]);

/** Whether a host name or address (as written in a URL, or as resolved) is not on the internet. */
export function isLocalHost(hostname: string): boolean {
  // "localhost." is localhost: a trailing dot only makes a DNS name absolute.
  const host = hostname
    .replace(/^\[|\]$/g, "")
    .replace(/\.$/, "")
    .toLowerCase();
  if (host === "localhost" || host.endsWith(".localhost")) return true;
  const family = isIP(host);
  if (family === 4) return localAddresses.check(host, "ipv4");
  if (family === 6) {
    // An IPv4-mapped IPv6 address (::ffff:127.0.0.1) is the IPv4 address it maps.
    const mapped = /^::ffff:([0-9.]+)$/.exec(host)?.[1];
    if (mapped) return localAddresses.check(mapped, "ipv4");
    if (/^::ffff:/.test(host)) return true;
    return localAddresses.check(host, "ipv6");
  }
  return false;
}

/** Whether the sandbox lets this URL reach the developer's own machine (localhost, 127.0.0.1). */
export function isSandboxLocal(url: URL, sandbox: boolean): boolean {
  return sandbox && sandboxHttpHosts.has(url.hostname);
}

/** The URL as Emisor will call it (normalised), or a 1000 naming the rule it breaks. */
export function checkWebhookUrl(raw: string, sandbox: boolean): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalidField("url", "x-url", "must be an absolute URL");
  }
  if (url.username || url.password) throw invalidField("url", "x-url", "must not contain credentials");
  if (url.protocol === "http:" && isSandboxLocal(url, sandbox)) return url.href;
  if (url.protocol !== "https:") {
    throw invalidField(
      "url",
      "x-url",
      sandbox ? "must be https (or http://localhost or http://127.0.0.1 in sandbox)" : "must be https",
    );
  }
  // Sandbox adds localhost and 127.0.0.1 only (over http, and over https as here): any other local
  // or private address, https://169.254.169.254/ (a cloud's metadata service) or
  // https://10.0.0.1/, is refused there as well.
  if (isLocalHost(url.hostname) && !isSandboxLocal(url, sandbox))
    throw invalidField("url", "x-url", "must not point to a local or private address");
  return url.href;
}
