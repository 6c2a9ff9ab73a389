import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { recordSecret } from "./secrets.ts";

/**
 * The openssl command-line tool as an independent client: whatever Emisor ciphers, openssl
 * must decipher, and the other way round, with RSA-OAEP-SHA256 (OAEP digest and MGF1 SHA-256).
 */
const oaepOptions = [
  "-pkeyopt",
  "rsa_padding_mode:oaep",
  "-pkeyopt",
  "rsa_oaep_md:sha256",
  "-pkeyopt",
  "rsa_mgf1_md:sha256",
];

export interface OpensslKeyPair {
  dir: string;
  privatePath: string;
  publicPem: string;
}

export function opensslKeyPair(bits = 2048): OpensslKeyPair {
  const dir = mkdtempSync(path.join(tmpdir(), "emisor-openssl-"));
  const privatePath = path.join(dir, "private.pem");
  execFileSync(
    "openssl",
    ["genpkey", "-algorithm", "RSA", "-pkeyopt", `rsa_keygen_bits:${bits}`, "-out", privatePath],
    {
      stdio: "ignore",
    },
  );
  const publicPem = execFileSync("openssl", ["pkey", "-in", privatePath, "-pubout"]).toString();
  recordSecret("private_key", readFileSync(privatePath, "utf8"));
  return { dir, privatePath, publicPem };
}

/** Deciphers Base64 `ciphertext` with the private key, as a client would. */
export function opensslDecrypt(pair: OpensslKeyPair, ciphertext: string): string {
  const input = path.join(pair.dir, "ciphertext.bin");
  writeFileSync(input, Buffer.from(ciphertext, "base64"));
  return execFileSync("openssl", [
    "pkeyutl",
    "-decrypt",
    "-inkey",
    pair.privatePath,
    ...oaepOptions,
    "-in",
    input,
  ]).toString();
}

/** Ciphers `plaintext` under a PEM public key with openssl; standard Base64. */
export function opensslEncrypt(
  publicPem: string,
  plaintext: string,
  padding: "oaep" | "pkcs1" = "oaep",
): string {
  const dir = mkdtempSync(path.join(tmpdir(), "emisor-openssl-"));
  const keyPath = path.join(dir, "public.pem");
  const input = path.join(dir, "plain.txt");
  writeFileSync(keyPath, publicPem);
  writeFileSync(input, plaintext);
  const options = padding === "oaep" ? oaepOptions : ["-pkeyopt", "rsa_padding_mode:pkcs1"];
  return execFileSync("openssl", [
    "pkeyutl",
    "-encrypt",
    "-pubin",
    "-inkey",
    keyPath,
    ...options,
    "-in",
    input,
  ]).toString("base64");
}

export function opensslEcPublicKey(): string {
  const dir = mkdtempSync(path.join(tmpdir(), "emisor-openssl-"));
  const privatePath = path.join(dir, "ec.pem");
  execFileSync("openssl", [
    "genpkey",
    "-algorithm",
    "EC",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-out",
    privatePath,
  ]);
  return execFileSync("openssl", ["pkey", "-in", privatePath, "-pubout"]).toString();
}

export function readPrivatePem(pair: OpensslKeyPair): string {
  return readFileSync(pair.privatePath, "utf8");
}

/** URL-safe Base64 without padding, as the origin API sent values in query strings. */
export function toUrlSafe(base64: string): string {
  return base64.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
