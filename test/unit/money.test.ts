// Proves money parsing never rounds, rendering is exact, and the half-up rule for IVA.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { AppError } from "../../src/errors.ts";
import {
  formatPesos,
  ivaOf,
  mulDivHalfUp,
  parsePesos,
  parsePesosText,
  toPesos,
} from "../../src/ledger/money.ts";

const max = { maxCents: 1_000_000_000n };

test("parsePesos accepts up to two decimals exactly", () => {
  assert.equal(parsePesos(100, "amount", max), 10_000n);
  assert.equal(parsePesos(100.1, "amount", max), 10_010n);
  assert.equal(parsePesos(0.29, "amount", max), 29n);
  assert.equal(parsePesos(0.01, "amount", max), 1n);
  assert.equal(parsePesos(1e2, "amount", max), 10_000n);
  assert.equal(parsePesos(10_000_000, "amount", max), 1_000_000_000n);
});

test("parsePesos rejects, never rounds", () => {
  for (const bad of [0, -1, 1.005, 0.001, 1e-7, Number.NaN, Number.POSITIVE_INFINITY, 10_000_000.01, 1e21]) {
    assert.throws(() => parsePesos(bad, "amount", max), AppError, `accepted ${bad}`);
  }
  assert.equal(parsePesos(0, "amount", { ...max, allowZero: true }), 0n);
});

test("every centavo amount round-trips through the JSON number", () => {
  fc.assert(
    fc.property(fc.bigInt({ min: 1n, max: 1_000_000_000n }), (cents) => {
      const json = JSON.parse(JSON.stringify({ amount: toPesos(cents) })) as { amount: number };
      assert.equal(parsePesos(json.amount, "amount", max), cents);
    }),
    { numRuns: 5000 },
  );
});

test("formatPesos and parsePesosText", () => {
  assert.equal(formatPesos(123_456n), "1234.56");
  assert.equal(formatPesos(5n), "0.05");
  assert.equal(formatPesos(-5n), "-0.05");
  assert.equal(parsePesosText("1000.00", "x", max.maxCents), 100_000n);
  assert.throws(() => parsePesosText("1,000", "x", max.maxCents), AppError);
  assert.throws(() => parsePesosText("1e3", "x", max.maxCents), AppError);
});

test("IVA is 16% rounded half-up to the centavo", () => {
  assert.equal(ivaOf(0n), 0n);
  assert.equal(ivaOf(3n), 0n); // 0.48 -> 0
  assert.equal(ivaOf(4n), 1n); // 0.64 -> 1
  assert.equal(ivaOf(25n), 4n); // 4.00
  assert.equal(ivaOf(1000n), 160n); // 10.00 -> 1.60
  assert.equal(ivaOf(1550n), 248n); // 15.50 -> 2.48
  assert.equal(mulDivHalfUp(5n, 1n, 10n), 1n); // 0.5 -> 1
  assert.equal(mulDivHalfUp(4n, 1n, 10n), 0n); // 0.4 -> 0
  fc.assert(
    fc.property(fc.bigInt({ min: 0n, max: 10n ** 12n }), (commission) => {
      const exact = commission * 16n; // in hundredths of a centavo
      const iva = ivaOf(commission);
      assert.ok(iva * 100n - exact <= 50n && exact - iva * 100n < 50n);
    }),
  );
});
