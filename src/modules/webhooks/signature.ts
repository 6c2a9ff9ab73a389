import { createHmac, randomBytes } from "node:crypto";
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
