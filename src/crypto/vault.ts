import { createCipheriv, createDecipheriv, createHmac, randomBytes } from "node:crypto";

/**
 * Authenticated encryption at rest (AES-256-GCM) for card numbers and the system private key.
 * Sealed form: "v1.<iv>.<tag>.<ciphertext>", Base64url parts. `context` is bound as associated
 * data, so a value sealed for one row cannot be swapped into another.
 */
export function seal(key: Buffer, plaintext: string, context = ""): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  cipher.setAAD(Buffer.from(context));
  const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  return ["v1", iv, cipher.getAuthTag(), ciphertext]
    .map((part) => (typeof part === "string" ? part : part.toString("base64url")))
    .join(".");
}

export function open(key: Buffer, sealed: string, context = ""): string {
  const [version, iv, tag, ciphertext] = sealed.split(".");
  if (version !== "v1" || !iv || !tag || ciphertext === undefined) throw new Error("not a sealed value");
  const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(iv, "base64url"));
  decipher.setAAD(Buffer.from(context));
  decipher.setAuthTag(Buffer.from(tag, "base64url"));
  return Buffer.concat([decipher.update(Buffer.from(ciphertext, "base64url")), decipher.final()]).toString(
    "utf8",
  );
}

/** A keyed fingerprint: equal inputs give equal fingerprints, without revealing the input. */
export function fingerprint(key: Buffer, value: string): string {
  return createHmac("sha256", key).update(value).digest("hex");
}
