import type { LookupAddress } from "node:dns";
import { lookup as dnsLookup } from "node:dns/promises";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import { isLocalHost } from "./url.ts";

/** Every address a host name resolves to (the system resolver, as `fetch` would use). */
export type Resolve = (hostname: string) => Promise<LookupAddress[]>;
export const resolveByDns: Resolve = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/** A host name that resolves to an address that is not on the internet: the call is not made. */
export class LocalAddressRefused extends Error {
  readonly code = "ELOCALADDRESS";
  constructor(hostname: string) {
    super(`${hostname} resolves to a local or private address`);
  }
}

/**
 * The connection's own name lookup: the name is resolved once, refused if ANY of its addresses is
 * local or private (the rules of `checkWebhookUrl` for addresses written literally), and the
 * connection is made to the addresses that were checked. Checking a name and then letting the
 * connection resolve it again would let a DNS server answer a public address to the check and
 * 127.0.0.1 or 169.254.169.254 to the connection (DNS rebinding).
 */
function pinnedLookup(resolve: Resolve, allowLocal: boolean): LookupFunction {
  return (hostname, options, callback) => {
    const checked = (resolved: LookupAddress[]): LookupAddress[] => {
      if (!allowLocal && resolved.some((entry) => isLocalHost(entry.address)))
        throw new LocalAddressRefused(hostname);
      const addresses = options.family
        ? resolved.filter((entry) => entry.family === options.family)
        : resolved;
      if (addresses.length === 0)
        throw Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" });
      return addresses;
    };
    // The callback runs outside the promise chain, as dns.lookup's does: were it to throw, the
    // error must not come back here and call it a second time.
    resolve(hostname)
      .then(checked)
      .then(
        (addresses) =>
          process.nextTick(() => {
            const [first] = addresses as [LookupAddress];
            if (options.all) callback(null, addresses);
            else callback(null, first.address, first.family);
          }),
        (error: NodeJS.ErrnoException) => process.nextTick(() => callback(error, "", 0)),
      );
  };
}

/**
 * POSTs `body` and answers the response's status; the response body is not read (the connection
 * is closed), redirects are not followed. `allowLocal` is for the sandbox's own hosts (localhost).
 */
export function post(
  url: string,
  options: {
    headers: Record<string, string>;
    body: string;
    signal: AbortSignal;
    resolve: Resolve;
    allowLocal: boolean;
  },
): Promise<number> {
  const target = new URL(url);
  const send = target.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const request = send(
      target,
      {
        method: "POST",
        headers: { ...options.headers, "content-length": String(Buffer.byteLength(options.body)) },
        signal: options.signal,
        lookup: pinnedLookup(options.resolve, options.allowLocal),
        agent: false,
      },
      (response) => {
        resolve(response.statusCode ?? 0);
        response.destroy();
      },
    );
    request.on("error", reject);
    request.end(options.body);
  });
}
