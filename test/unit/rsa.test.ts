import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { describe, it } from "node:test";
import { encryptFor, SystemKey } from "../../src/crypto/rsa.ts";
import type { AppError } from "../../src/errors.ts";
import { limits } from "../../src/limits.ts";

describe("ciphered card numbers, deciphered off the event loop", () => {
  const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const key = new SystemKey(publicKey.export({ format: "pem", type: "spki" }).toString(), privateKey);

  it("many at once, more than may run together: each gets its own number, and a bad one frees its turn", async () => {
    const numbers = Array.from({ length: limits.rsaDecryptsInFlight * 8 + 3 }, (_, i) =>
      String(5311223344000000 + i),
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
    // Every turn was given back: one more still runs.
    assert.equal((await key.decryptAsync(encryptFor(publicKey, "42"), "card_number")).toString(), "42");
  });
});
