import { randomInt } from "node:crypto";

/** Card numbers: the Luhn (mod 10) check digit, and 16-digit numbers built from a BIN. */
export function luhnCheckDigit(body: string): number {
  let sum = 0;
  for (let i = 0; i < body.length; i++) {
    let digit = Number(body[body.length - 1 - i]);
    if (i % 2 === 0) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
  }
  return (10 - (sum % 10)) % 10;
}

export function isLuhnValid(number: string): boolean {
  return /^[0-9]{12,19}$/.test(number) && luhnCheckDigit(number.slice(0, -1)) === Number(number.at(-1));
}

/** A random Luhn-valid 16-digit number starting with the 6-8 digit BIN. */
export function randomPan(bin: string): string {
  if (!/^[0-9]{6,8}$/.test(bin)) throw new RangeError("a BIN is 6-8 digits");
  let body = bin;
  while (body.length < 15) body += String(randomInt(10));
  return `${body}${luhnCheckDigit(body)}`;
}
