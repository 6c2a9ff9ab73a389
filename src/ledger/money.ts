import { invalidField } from "../errors.ts";

/**
 * Money is bigint centavos (MXN, ISO 4217 484) from the edge parser to the SQL column. The
 * contract speaks JSON numbers in pesos; this file is the only place that converts.
 */
export type Cents = bigint;

export const currencyCode = "484";
/** The currency's name wherever a response describes it (a product's `coin`, card or airtime). */
export const currencyDescription = "Peso mexicano";

// String(n) of a finite number below 1e21 is its shortest round-trip decimal, so the decimals
// a client sent are exactly the decimals we see (100.10 arrives as 100.1, 1e2 as 100): a JSON
// number with more digits than a double holds is refused before it becomes one (json-body.ts).
const pesosPattern = /^([0-9]+)(?:\.([0-9]{1,2}))?$/;

/**
 * Parses a peso amount sent as a JSON number. Rejects (never rounds) negatives, non-finite
 * values, more than two decimals and anything above `maxCents`; zero only when allowed.
 */
export function parsePesos(
  value: number,
  field: string,
  options: { maxCents: Cents; allowZero?: boolean },
): Cents {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw invalidField(field, "money", "must be a finite number of pesos");
  }
  // 1e300 is refused for its size, not for its decimals (its String() is "1e+300").
  if (value > Number(options.maxCents) / 100) {
    throw invalidField(field, "money", `must be at most ${formatPesos(options.maxCents)}`);
  }
  const match = pesosPattern.exec(String(value));
  if (!match) {
    throw invalidField(field, "money", "must be a non-negative amount with at most 2 decimals");
  }
  const cents = BigInt(match[1] ?? "0") * 100n + BigInt((match[2] ?? "").padEnd(2, "0"));
  if (cents === 0n && !options.allowZero) throw invalidField(field, "money", "must be greater than 0");
  if (cents > options.maxCents) {
    throw invalidField(field, "money", `must be at most ${formatPesos(options.maxCents)}`);
  }
  return cents;
}

/** Renders centavos as the JSON number the contract expects (123.45). */
export function toPesos(cents: Cents): number {
  // An integer below 2^53 divided by 100 is the double nearest the decimal, which prints exactly.
  return Number(cents) / 100;
}

/** "1234.50": for messages and logs, never for arithmetic. */
export function formatPesos(cents: Cents): string {
  const sign = cents < 0n ? "-" : "";
  const abs = cents < 0n ? -cents : cents;
  return `${sign}${abs / 100n}.${(abs % 100n).toString().padStart(2, "0")}`;
}

/**
 * amount x numerator / denominator, rounded half-up to the centavo: the one rounding rule for
 * commissions and taxes (IVA 16% of 0.03 is 0.0048 -> 0.00; of 0.05 is 0.008 -> 0.01).
 */
export function mulDivHalfUp(amount: Cents, numerator: bigint, denominator: bigint): Cents {
  if (amount < 0n || numerator < 0n || denominator <= 0n) {
    throw new RangeError("mulDivHalfUp takes non-negative operands and a positive denominator");
  }
  return (amount * numerator * 2n + denominator) / (2n * denominator);
}

/** IVA (Mexican VAT), 16%, on a commission, half-up to the centavo. */
export const ivaRatePercent = 16n;
export function ivaOf(commission: Cents): Cents {
  return mulDivHalfUp(commission, ivaRatePercent, 100n);
}

/** Parses a peso amount written as text ("1000.00"), for the command line. */
export function parsePesosText(text: string, field: string, maxCents: Cents): Cents {
  if (!/^[0-9]{1,15}(?:\.[0-9]{1,2})?$/.test(text)) {
    throw invalidField(field, "money", "must be an amount like 1000.00 (at most 2 decimals)");
  }
  return parsePesos(Number(text), field, { maxCents, allowZero: true });
}
