import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { after, describe, it } from "node:test";
import { DecryptWorkers } from "../../src/crypto/decrypt-workers.ts";
import { encryptFor, SystemKey } from "../../src/crypto/rsa.ts";
import type { AppError } from "../../src/errors.ts";
import { limits } from "../../src/limits.ts";

describe("ciphered card numbers, deciphered off the event loop on worker threads", () => {
  const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const key = new SystemKey(publicKey.export({ format: "pem", type: "spki" }).toString(), privateKey);

  after(() => key.close());

  it("many at once, more than the workers take in one round: each gets its own number, and a bad one fails alone", async () => {
    const numbers = Array.from(
      { length: limits.rsaDecryptWorkers * limits.rsaDecryptBatchMax * 4 + 3 },
      (_, i) => String(5311223344000000 + i),
    );
    const garbage = Buffer.alloc(256, 7).toString("base64");
    const results = await Promise.allSettled(
      numbers.flatMap((n) => [
        key.decryptAsync(encryptFor(publicKey, n), "card_number"),
        key.decryptAsync(garbage, "card_number"),
      ]),
    );
    results.forEach((result, i) => {
      if (i % 2 === 0) assert.equal(result.status === "fulfilled" && result.value.toString(), numbers[i / 2]);
      else assert.equal(result.status === "rejected" && (result.reason as AppError).def?.code, 1005);
    });
    // The workers are all still there: one more still runs.
    assert.equal((await key.decryptAsync(encryptFor(publicKey, "42"), "card_number")).toString(), "42");
  });

  it("a value of the wrong length, or not Base64, is refused before reaching a worker", async () => {
    for (const text of ["", "not base64!", Buffer.alloc(100).toString("base64")]) {
      await assert.rejects(
        key.decryptAsync(text, "card_number"),
        (error: AppError) => error.def?.code === 1005,
      );
    }
  });

  it("workers that cannot start fail the waiting decryptions instead of hanging or looping, and close", async () => {
    const broken = new DecryptWorkers(Buffer.from("not a key"), 2, 2);
    const results = await Promise.allSettled(
      Array.from({ length: 7 }, () => broken.decrypt(Buffer.alloc(256, 1))),
    );
    assert.ok(results.every((result) => result.status === "rejected"));
    await assert.rejects(broken.decrypt(Buffer.alloc(256, 1)));
    await broken.close();
    await assert.rejects(broken.decrypt(Buffer.alloc(256, 1)), /closed/);
  });

  it("closing fails what is waiting and what a worker holds, instead of leaving it unanswered", async () => {
    const workers = new DecryptWorkers(privateKey.export({ format: "der", type: "pkcs8" }), 1, 2);
    const ciphertext = Buffer.from(encryptFor(publicKey, "5311223344556677"), "base64");
    assert.equal((await workers.decrypt(ciphertext))?.toString(), "5311223344556677");
    const settled = Promise.allSettled(Array.from({ length: 6 }, () => workers.decrypt(ciphertext)));
    await workers.close();
    const results = await settled;
    assert.ok(results.every((result) => result.status === "rejected"));
  });
});
