import {
  constants,
  createPrivateKey,
  createPublicKey,
  generateKeyPair,
  type KeyObject,
  privateDecrypt,
  publicEncrypt,
} from "node:crypto";
import { promisify } from "node:util";
import type { Queryable } from "../db/database.ts";
import { AppError, errors } from "../errors.ts";
import { limits } from "../limits.ts";
import { DecryptWorkers } from "./decrypt-workers.ts";
import { open, seal } from "./vault.ts";

/**
 * Sensitive values travel ciphered with RSA-OAEP (SHA-256 for both the OAEP digest and MGF1),
 * Base64. Clients cipher card numbers and PINs under the system public key; Emisor ciphers
 * response secrets under the client's registered key. The origin API used PKCS#1 v1.5, whose
 * private decryption current Node disables (Marvin attack), so Emisor uses OAEP; a v1.5
 * ciphertext fails like any other undecipherable value, so there is no padding oracle.
 */
const oaep = { padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" } as const;
const systemKeyId = "rsa-system";
const generateKeyPairAsync = promisify(generateKeyPair);

/** Validates an SPKI PEM RSA public key of an accepted size; returns it normalised. */
export function parsePublicKey(pem: string): { key: KeyObject; pem: string; bits: number } {
  const invalid = (message: string) => new AppError(errors.invalidPublicKey, { message });
  const text = pem.trim();
  if (!text.startsWith("-----BEGIN PUBLIC KEY-----") || !text.endsWith("-----END PUBLIC KEY-----")) {
    throw invalid("public_key must be a PEM beginning with -----BEGIN PUBLIC KEY----- (SPKI)");
  }
  let key: KeyObject;
  try {
    key = createPublicKey({ key: text, format: "pem", type: "spki" });
  } catch {
    throw invalid("public_key is not a readable SPKI PEM public key");
  }
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  if (key.asymmetricKeyType !== "rsa") throw invalid("public_key must be an RSA key");
  if (bits < limits.rsaKeyBitsMin || bits > limits.rsaKeyBitsMax) {
    throw invalid(
      `public_key must have ${limits.rsaKeyBitsMin}-${limits.rsaKeyBitsMax} bits, it has ${bits}`,
    );
  }
  // A key OpenSSL reads but will not cipher under (a public exponent over 64 bits on a modulus
  // over 3072 bits) was stored and every later answer ciphered for it was a 500: a trial
  // encryption at registration is the check that OpenSSL itself makes.
  try {
    encryptFor(key, "check");
  } catch {
    throw invalid("public_key cannot be used for RSA-OAEP-SHA256 (check its public exponent)");
  }
  return { key, pem: key.export({ format: "pem", type: "spki" }).toString(), bits };
}

/** Ciphers `plaintext` for the holder of `publicKey`; standard Base64. */
export function encryptFor(publicKey: KeyObject | string, plaintext: string | Buffer): string {
  return publicEncrypt({ key: publicKey, ...oaep }, Buffer.from(plaintext)).toString("base64");
}

/** Standard or URL-safe Base64, with or without padding; anything else is not a ciphertext. */
export function decodeBase64(text: string): Buffer | undefined {
  if (text.length === 0 || text.length > limits.cipherTextLengthMax) return undefined;
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) return undefined;
  const standard = text.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "");
  if (standard.length % 4 === 1) return undefined;
  return Buffer.from(standard, "base64");
}

function undecipherable(field: string): AppError {
  return new AppError(errors.invalidCiphertext, {
    message: `${field} could not be deciphered: cipher it with RSA-OAEP-SHA256 under the system public key, Base64`,
    details: [
      { field, rule: "ciphertext", message: "not an RSA-OAEP-SHA256 ciphertext under the system key" },
    ],
  });
}

export class SystemKey {
  readonly publicKeyPem: string;
  readonly #privateKey: KeyObject;
  readonly #modulusBytes: number;
  /** Started at the first `decryptAsync`: see DecryptWorkers. */
  readonly #workers: DecryptWorkers;

  constructor(publicKeyPem: string, privateKey: KeyObject) {
    this.publicKeyPem = publicKeyPem;
    this.#privateKey = privateKey;
    this.#modulusBytes = (privateKey.asymmetricKeyDetails?.modulusLength ?? 2048) / 8;
    this.#workers = new DecryptWorkers(
      privateKey.export({ format: "der", type: "pkcs8" }),
      limits.rsaDecryptWorkers,
      limits.rsaDecryptBatchMax,
    );
  }

  /** Deciphers a Base64 value ciphered under the system public key, or throws 1005. */
  decrypt(text: string, field: string): Buffer {
    const bytes = this.#ciphertext(text, field);
    try {
      return privateDecrypt({ key: this.#privateKey, ...oaep }, bytes);
    } catch {
      throw undecipherable(field);
    }
  }

  /**
   * The same off the event loop, on worker threads of Emisor's own (`limits.rsaDecryptWorkers`, in
   * batches of at most `limits.rsaDecryptBatchMax`), so a burst of ciphered card numbers stalls
   * neither other requests nor the scrypt checks on libuv's pool. What request handlers use.
   */
  async decryptAsync(text: string, field: string): Promise<Buffer> {
    const bytes = this.#ciphertext(text, field);
    // A worker lost twice is the service's failure (500), not the client's ciphertext.
    const plaintext = await this.#workers.decrypt(bytes);
    if (!plaintext) throw undecipherable(field);
    return plaintext;
  }

  /** Stops the decryption workers (with the app). */
  close(): Promise<void> {
    return this.#workers.close();
  }

  #ciphertext(text: string, field: string): Buffer {
    const bytes = decodeBase64(text);
    if (!bytes || bytes.length !== this.#modulusBytes) throw undecipherable(field);
    return bytes;
  }
}

/**
 * Loads the system key pair, generating and storing it (sealed under the wrap key) on first
 * start. Several processes starting together converge on one pair: the insert ignores a
 * conflict and everyone reads back the row that won.
 */
export async function loadOrCreateSystemKey(db: Queryable, wrapKey: Buffer): Promise<SystemKey> {
  const existing = await findSystemKey(db);
  if (!existing) {
    const { publicKey, privateKey } = await generateKeyPairAsync("rsa", { modulusLength: 2048 });
    await db
      .insertInto("system_keys")
      .values({
        id: systemKeyId,
        public_key_pem: publicKey.export({ format: "pem", type: "spki" }).toString(),
        private_key_sealed: seal(
          wrapKey,
          privateKey.export({ format: "pem", type: "pkcs8" }).toString(),
          systemKeyId,
        ),
      })
      .onConflict((oc) => oc.column("id").doNothing())
      .execute();
  }
  const row = existing ?? (await findSystemKey(db));
  if (!row) throw new Error("the system key could not be stored");
  let privatePem: string;
  try {
    privatePem = open(wrapKey, row.private_key_sealed, systemKeyId);
  } catch {
    throw new Error("EMISOR_MASTER_KEY is not the key that sealed this database's system key pair");
  }
  return new SystemKey(row.public_key_pem, createPrivateKey(privatePem));
}

function findSystemKey(db: Queryable) {
  return db
    .selectFrom("system_keys")
    .select(["public_key_pem", "private_key_sealed"])
    .where("id", "=", systemKeyId)
    .executeTakeFirst();
}
