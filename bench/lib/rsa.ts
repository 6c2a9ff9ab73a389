import { constants, generateKeyPairSync, publicEncrypt } from "node:crypto";
import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";

/**
 * The ceiling of ciphered card numbers: RSA-OAEP-SHA256 2048-bit private decryptions per second
 * on every core at once (worker threads), the same operation Emisor's pool performs per request.
 */
const source = `
const { parentPort, workerData } = require("node:worker_threads");
const { createPrivateKey, privateDecrypt, constants } = require("node:crypto");
const key = createPrivateKey(workerData.pem);
const data = Buffer.from(workerData.ciphertext, "base64");
const end = Date.now() + workerData.ms;
let n = 0;
while (Date.now() < end) {
  privateDecrypt({ key, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" }, data);
  n++;
}
parentPort.postMessage(n);`;

export async function rsaDecryptionsPerSecond(seconds: number): Promise<number> {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const pem = privateKey.export({ format: "pem", type: "pkcs8" }).toString();
  const ciphertext = publicEncrypt(
    { key: publicKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" },
    Buffer.from("5311223344556677"),
  ).toString("base64");
  const counts = await Promise.all(
    Array.from(
      { length: availableParallelism() },
      () =>
        new Promise<number>((resolve, reject) => {
          const worker = new Worker(source, {
            eval: true,
            workerData: { pem, ciphertext, ms: seconds * 1000 },
          });
          worker.once("message", (n: number) => {
            resolve(n);
            void worker.terminate();
          });
          worker.once("error", reject);
        }),
    ),
  );
  return Math.round(counts.reduce((a, b) => a + b, 0) / seconds);
}
