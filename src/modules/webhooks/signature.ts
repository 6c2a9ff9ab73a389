import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { limits } from "../../limits.ts";

/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): a secret is "whsec_" followed by
 * the Base64 of random bytes; the key is those bytes. Each attempt is signed over
 * "{webhook-id}.{webhook-timestamp}.{body}" with HMAC-SHA256, sent as "v1,<Base64>"; several
 * signatures (during a secret rotation) are separated by spaces.
 */
export const secretPrefix = "whsec_";

/** The AES-GCM associated data of an endpoint's sealed secrets: a secret only opens on its row. */
export const secretContext = (endpointId: string) => `webhook-secret:${endpointId}`;

export function newSigningSecret(): string {
  return secretPrefix + randomBytes(limits.webhookSecretBytes).toString("base64");
}

function keyOf(secret: string): Buffer {
  if (!secret.startsWith(secretPrefix)) throw new Error("not a webhook signing secret");
  return Buffer.from(secret.slice(secretPrefix.length), "base64");
}

export function sign(secret: string, id: string, timestampSeconds: number, body: string): string {
  const mac = createHmac("sha256", keyOf(secret))
    .update(`${id}.${timestampSeconds}.${body}`)
    .digest("base64");
  return `v1,${mac}`;
}

/** The headers of one attempt: every signature the receiver may check, newest secret first. */
export function signedHeaders(
  secrets: readonly string[],
  id: string,
  timestampSeconds: number,
  body: string,
): Record<string, string> {
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestampSeconds),
    "webhook-signature": secrets.map((secret) => sign(secret, id, timestampSeconds, body)).join(" "),
  };
}

/**
 * Whether `header` (a webhook-signature value: "v1,<Base64>" entries separated by spaces) holds
 * the signature, under one of `secrets`, of "{id}.{timestamp}.{body}", with `body` the bytes as
 * received (a signature is over bytes, and decoding them first would change what is compared).
 * Compared in constant time; a malformed entry is ignored, as a receiver of webhooks ignores it.
 */
export function hasValidSignature(
  secrets: readonly string[],
  signed: { id: string; timestamp: string; body: Buffer | string },
  header: string,
): boolean {
  const expected = secrets.map((secret) =>
    createHmac("sha256", keyOf(secret))
      .update(`${signed.id}.${signed.timestamp}.`)
      .update(signed.body)
      .digest(),
  );
  return header.split(" ").some((entry) => {
    const comma = entry.indexOf(",");
    if (comma < 0 || entry.slice(0, comma) !== "v1") return false;
    const given = Buffer.from(entry.slice(comma + 1), "base64");
    return expected.some((mac) => given.length === mac.length && timingSafeEqual(given, mac));
  });
}
