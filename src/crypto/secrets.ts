import { randomBytes, randomInt, scrypt, timingSafeEqual } from "node:crypto";
import { limits } from "../limits.ts";

/**
 * Passwords and other low-entropy secrets: scrypt with a per-secret salt. Encoded as
 * "scrypt$N$r$p$salt$hash" so parameters can be raised later without breaking old hashes.
 */
const params = { N: 16384, r: 8, p: 1 };
const keyLength = 32;

let running = 0;
const waiting: Array<() => void> = [];

/**
 * At most `limits.scryptInFlight` checks at once (one per core), the rest waiting in arrival
 * order. A check is CPU for about 40 ms and 16 MB (N=16384, r=8) on a libuv thread: more at once
 * than the cores only finishes them no sooner and holds more memory.
 */
async function scryptAsync(
  secret: string,
  salt: Buffer,
  N: number,
  r: number,
  p: number,
  beforeCheck?: () => void | Promise<void>,
): Promise<Buffer> {
  if (running >= limits.scryptInFlight) await new Promise<void>((resolve) => waiting.push(resolve));
  else running++;
  try {
    await beforeCheck?.();
    return await new Promise((resolve, reject) => {
      scrypt(secret, salt, keyLength, { N, r, p, maxmem: 64 * 1024 * 1024 }, (error, key) =>
        error ? reject(error) : resolve(key),
      );
    });
  } finally {
    // The turn passes straight to the next in line, or is given back.
    const next = waiting.shift();
    if (next) next();
    else running--;
  }
}

export async function hashSecret(secret: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scryptAsync(secret, salt, params.N, params.r, params.p);
  return ["scrypt", params.N, params.r, params.p, salt.toString("base64"), hash.toString("base64")].join("$");
}

/**
 * Whether `secret` is the one `encoded` was made from. `beforeCheck` runs when this check's turn
 * comes, right before scrypt: what it throws ends the check (a login locked while it waited in
 * line is not checked).
 */
export async function verifySecret(
  secret: string,
  encoded: string,
  beforeCheck?: () => void | Promise<void>,
): Promise<boolean> {
  const [scheme, N, r, p, salt, hash] = encoded.split("$");
  if (scheme !== "scrypt" || !N || !r || !p || !salt || !hash) return false;
  const expected = Buffer.from(hash, "base64");
  const actual = await scryptAsync(
    secret,
    Buffer.from(salt, "base64"),
    Number(N),
    Number(r),
    Number(p),
    beforeCheck,
  );
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** A hash of nothing anyone knows: checking against it makes an unknown key cost a real check. */
export const decoyHash =
  "scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";

const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";

/** A random string from an unambiguous alphabet (no 0/O, 1/l/I), e.g. for API keys and passwords. */
export function randomString(length: number): string {
  let out = "";
  for (let i = 0; i < length; i++) out += alphabet[randomInt(alphabet.length)];
  return out;
}
