import { isRealYymmdd } from "./curp.ts";

/**
 * RFC, the tax id (domain-mx §4): company 3 letters + YYMMDD + 3 homoclave (12); person 4 + 6 + 3
 * (13); 10 = a person without homoclave. Emisor validates the format and the date, never the
 * check digit: about 1.5% of RFCs in use fail it, as does the generic XAXX010101000.
 */
const pattern = /^[A-Z&Ñ]{3,4}[0-9]{6}([0-9A-Z]{3})?$/;

export function isValidRfc(rfc: string): boolean {
  if (rfc.length < 10 || rfc.length > 13 || !pattern.test(rfc)) return false;
  const letters = /^[A-Z&Ñ]{4}[0-9]/.test(rfc) ? 4 : 3;
  if (letters === 3 && rfc.length === 10) return false; // a company RFC always has its homoclave
  return isRealYymmdd(rfc.slice(letters, letters + 6));
}

/** A natural person's RFC: 4 letters (10 characters without homoclave, 13 with it). */
export function isPersonRfc(rfc: string): boolean {
  return /^[A-Z&Ñ]{4}[0-9]/.test(rfc) && isValidRfc(rfc);
}

const alphabet = "0123456789ABCDEFGHIJKLMN&OPQRSTUVWXYZ Ñ";

/** The RFC check digit per SAT's rule; informative only (see above). */
export function rfcCheckDigit(rfc: string): string {
  const body = (rfc.length === 12 ? ` ${rfc}` : rfc).slice(0, 12);
  let sum = 0;
  for (let i = 0; i < 12; i++) sum += Math.max(0, alphabet.indexOf(body[i] ?? "")) * (13 - i);
  const r = sum % 11;
  return r === 0 ? "0" : r === 1 ? "A" : String(11 - r);
}
