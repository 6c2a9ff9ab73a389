import { randomBytes, randomInt, scrypt, timingSafeEqual } from "node:crypto";

/**
 * Passwords and other low-entropy secrets: scrypt with a per-secret salt. Encoded as
 * "scrypt$N$r$p$salt$hash" so parameters can be raised later without breaking old hashes.
 */
const params = { N: 16384, r: 8, p: 1 };
const keyLength = 32;

function scryptAsync(secret: string, salt: Buffer, N: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(secret, salt, keyLength, { N, r, p, maxmem: 64 * 1024 * 1024 }, (error, key) =>
      error ? reject(error) : resolve(key),
    );
  });
}

export async function hashSecret(secret: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scryptAsync(secret, salt, params.N, params.r, params.p);
  return ["scrypt", params.N, params.r, params.p, salt.toString("base64"), hash.toString("base64")].join("$");
}

export async function verifySecret(secret: string, encoded: string): Promise<boolean> {
  const [scheme, N, r, p, salt, hash] = encoded.split("$");
  if (scheme !== "scrypt" || !N || !r || !p || !salt || !hash) return false;
  const expected = Buffer.from(hash, "base64");
  const actual = await scryptAsync(secret, Buffer.from(salt, "base64"), Number(N), Number(r), Number(p));
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
