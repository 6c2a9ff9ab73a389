import { hkdfSync, randomBytes } from "node:crypto";
import { chmodSync, linkSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";

/**
 * One master key (EMISOR_MASTER_KEY, 32 bytes in hex or Base64) derives a separate key per
 * purpose, so a leak of one derived key exposes nothing else. Without the variable, in sandbox
 * mode only, a generated key file in the data directory is used and a warning is printed.
 */
export interface KeyRing {
  /** Signs bearer tokens (HMAC-SHA256). */
  token: Buffer;
  /** Seals card numbers at rest (AES-256-GCM). */
  vault: Buffer;
  /** Fingerprints card numbers for lookup (HMAC-SHA256). */
  fingerprint: Buffer;
  /** Seals the system RSA private key at rest (AES-256-GCM). */
  wrap: Buffer;
  /** Computes PIN verification values (HMAC-SHA256): a stolen database alone cannot be brute-forced. */
  pin: Buffer;
  /** Fingerprints idempotent request bodies (HMAC-SHA256), which may hold a password or a PIN. */
  idempotency: Buffer;
  /** Computes card verification values (HMAC-SHA256 of number and expiry): never stored. */
  cvv: Buffer;
}

export class MasterKeyError extends Error {}

export function parseMasterKey(text: string): Buffer {
  const trimmed = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(trimmed)
    ? Buffer.from(trimmed, "hex")
    : Buffer.from(trimmed, "base64");
  if (key.length !== 32)
    throw new MasterKeyError("EMISOR_MASTER_KEY must be 32 bytes, as 64 hex digits or Base64");
  // A placeholder, not a key: every byte alike (all zeros, all ones) derives keys anyone can.
  if (key.every((byte) => byte === key[0]))
    throw new MasterKeyError(
      "EMISOR_MASTER_KEY is a placeholder (every byte the same); generate one: openssl rand -hex 32",
    );
  return key;
}

export function loadMasterKey(options: {
  masterKey: string | undefined;
  dataDir: string;
  sandbox: boolean;
  warn: (message: string) => void;
}): Buffer {
  if (options.masterKey) return parseMasterKey(options.masterKey);
  if (!options.sandbox) throw new MasterKeyError("EMISOR_MASTER_KEY is required when EMISOR_SANDBOX=false");
  const file = path.join(options.dataDir, "master.key");
  if (!hasKey(file)) {
    mkdirSync(options.dataDir, { recursive: true });
    createKeyFile(file);
  }
  options.warn(`EMISOR_MASTER_KEY is not set: using the generated key in ${file} (sandbox only)`);
  return parseMasterKey(readFileSync(file, "utf8"));
}

/**
 * False when the key file is missing, or empty: a process killed between creating the file and
 * writing it leaves it so, and since no key was ever read from it nothing was sealed under it.
 */
function hasKey(file: string): boolean {
  try {
    return statSync(file).size > 0;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw error;
  }
}

/**
 * Writes a new key to a file of its own, then links it in place: the key file appears whole or
 * not at all, whenever the process dies. When another process linked its key first, that one is
 * kept (everyone reads the file after this).
 */
function createKeyFile(file: string): void {
  const scratch = `${file}.${process.pid}.tmp`;
  writeFileSync(scratch, randomBytes(32).toString("hex"), { mode: 0o600 });
  chmodSync(scratch, 0o600);
  try {
    // An empty file left by a killed start goes first (link never replaces).
    if (!hasKey(file)) rmSync(file, { force: true });
    linkSync(scratch, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  } finally {
    rmSync(scratch, { force: true });
  }
}

export function deriveKeyRing(master: Buffer): KeyRing {
  const derive = (purpose: string) => Buffer.from(hkdfSync("sha256", master, "emisor", purpose, 32));
  return {
    token: derive("token-signing"),
    vault: derive("pan-vault"),
    fingerprint: derive("pan-fingerprint"),
    wrap: derive("system-key-wrap"),
    pin: derive("pin-pepper"),
    idempotency: derive("idempotency-request"),
    cvv: derive("card-verification"),
  };
}
