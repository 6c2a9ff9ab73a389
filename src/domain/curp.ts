import { curpStateCodes } from "../modules/catalogs/data.ts";

/**
 * CURP, the 18-character population id (domain-mx §3): format, a state code from the list (NE =
 * born abroad) and the check digit: alphabet 0-9 A-N & O-Z, value = index; sum of value x (18 - i)
 * over the first 17 characters; check = (10 - sum mod 10) mod 10.
 */
const pattern = /^[A-Z]{4}[0-9]{6}[HMX][A-Z]{2}[A-Z]{3}[0-9A-Z][0-9]$/;
const alphabet = "0123456789ABCDEFGHIJKLMN&OPQRSTUVWXYZ";

export function curpCheckDigit(first17: string): number {
  let sum = 0;
  for (let i = 0; i < 17; i++) {
    const value = alphabet.indexOf(first17[i] ?? "");
    if (value < 0) throw new RangeError("not a CURP character");
    sum += value * (18 - i);
  }
  return (10 - (sum % 10)) % 10;
}

export type CurpProblem = "format" | "state" | "date" | "check_digit";

/** Why a CURP is invalid, or undefined when it is valid. */
export function curpProblem(curp: string): CurpProblem | undefined {
  if (!pattern.test(curp)) return "format";
  if (!curpStateCodes.has(curp.slice(11, 13))) return "state";
  // The 17th character tells the century: a digit for a birth up to 1999, a letter from 2000.
  if (!isRealYymmdd(curp.slice(4, 10), /[0-9]/.test(curp[16] ?? "") ? 1900 : 2000)) return "date";
  if (curpCheckDigit(curp.slice(0, 17)) !== Number(curp[17])) return "check_digit";
  return undefined;
}

export function isValidCurp(curp: string): boolean {
  return curpProblem(curp) === undefined;
}

/**
 * YYMMDD names a real day (29 February needs a leap year): in `century` when it is known (a CURP
 * says it), otherwise in some century (year 00 is then read as 2000, a leap year).
 */
export function isRealYymmdd(yymmdd: string, century: 1900 | 2000 = 2000): boolean {
  const year = century + Number(yymmdd.slice(0, 2));
  const mm = Number(yymmdd.slice(2, 4));
  const dd = Number(yymmdd.slice(4, 6));
  if (mm < 1 || mm > 12 || dd < 1) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][mm - 1] ?? 0;
  return dd <= days;
}
