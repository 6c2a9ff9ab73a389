import { createHmac, randomUUID, timingSafeEqual } from "node:crypto";
import { AppError, errors } from "../../errors.ts";

/**
 * Bearer tokens are signed, not stored: "<payload>.<signature>", both Base64url, the signature an
 * HMAC-SHA256 of the payload under a key derived from the master key. Verifying one costs a hash,
 * not a query. Revocation (logout, a disabled key) is checked against the API key's cached state.
 */
export interface TokenClaims {
  /** Token id, for revocation. */
  jti: string;
  /** API key id. */
  kid: string;
  /** Client id. */
  cid: string;
  /** Issued at and expires at, in Unix seconds. */
  iat: number;
  exp: number;
}

export function signToken(
  key: Buffer,
  claims: Omit<TokenClaims, "jti">,
): { token: string; claims: TokenClaims } {
  const full: TokenClaims = { jti: randomUUID(), ...claims };
  const payload = Buffer.from(JSON.stringify(full)).toString("base64url");
  const signature = createHmac("sha256", key).update(payload).digest("base64url");
  return { token: `${payload}.${signature}`, claims: full };
}

const tokenPattern = /^[A-Za-z0-9_-]{10,600}\.[A-Za-z0-9_-]{43}$/;

export function verifyToken(key: Buffer, token: string, nowSeconds: number): TokenClaims {
  if (!tokenPattern.test(token)) throw new AppError(errors.tokenInvalid);
  const [payload = "", signature = ""] = token.split(".");
  // Compared as text: decoding first would ignore the last character's two spare bits, and accept
  // four spellings of one token.
  const expected = Buffer.from(createHmac("sha256", key).update(payload).digest("base64url"));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    throw new AppError(errors.tokenInvalid);
  const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as TokenClaims;
  if (typeof claims.exp !== "number" || typeof claims.kid !== "string" || typeof claims.jti !== "string") {
    throw new AppError(errors.tokenInvalid);
  }
  if (claims.exp <= nowSeconds) throw new AppError(errors.tokenExpired);
  return claims;
}
