import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { hashSecret, verifySecret } from "../../src/crypto/secrets.ts";
import { limits } from "../../src/limits.ts";

describe("scrypt checks, one per core at once", () => {
  it("many at once, more than may run together: each answers for its own secret, in any order", async () => {
    const hashes = await Promise.all(["1234", "9876"].map((pin) => hashSecret(pin)));
    const checks = Array.from({ length: limits.scryptInFlight * 3 + 1 }, (_, i) => ({
      pin: i % 3 === 0 ? "0000" : i % 2 === 0 ? "1234" : "9876",
      hash: hashes[i % 2] as string,
    }));
    const answers = await Promise.all(checks.map(({ pin, hash }) => verifySecret(pin, hash)));
    assert.deepEqual(
      answers,
      checks.map(({ pin }, i) => pin === (i % 2 === 0 ? "1234" : "9876")),
    );
    // A malformed hash fails without taking a turn it never gives back.
    assert.equal(await verifySecret("1234", "not-a-hash"), false);
    assert.equal(await verifySecret("1234", hashes[0] as string), true);
  });
});
