import { createHmac } from "node:crypto";

/** Canonical JSON (sorted keys), so the same body in another key order is the same request. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/**
 * The stored fingerprint of a request. Keyed (HMAC under a key derived from the master key): a
 * body can hold a new API key's password or a PIN, and a plain hash of an otherwise guessable
 * body would let whoever reads the table test guesses of it at hash speed.
 */
export function requestHash(key: Buffer, method: string, path: string, body: unknown): string {
  return createHmac("sha256", key)
    .update(`${method} ${path}\n${canonicalJson(body)}`)
    .digest("hex");
}
