import { randomInt } from "node:crypto";
import { isValidClabe } from "./clabe.ts";

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

/**
 * Whether digits read as a card number: 13-19 of them passing Luhn. No scheme issues numbers
 * starting with 0 (a zero-padded reference is not a card), and an 18-digit number with a valid
 * CLABE control digit is taken for the CLABE it most likely is (Mexican card numbers have 16).
 */
function isCardNumber(digits: string): boolean {
  if (digits.length < 13 || digits[0] === "0" || !isLuhnValid(digits)) return false;
  return !(digits.length === 18 && isValidClabe(digits));
}

// Digits in groups joined by one space, hyphen or dot: how a card number is written by hand
// ("5311 0105 6911 4749", "5311-0105-6911-4749"). Other characters end a run.
const digitRuns = /[0-9]+(?:[ .-][0-9]+)*/g;
const digitGroups = /[0-9]+/g;

/**
 * Where card numbers are in `text`, as [start, end) spans: a number of 13-19 digits, or
 * consecutive whole groups of a run whose digits together make one ("Tarjeta 2 5311 0105 6911
 * 4749 12 27" holds one). A group longer than 19 digits is no card number, nor part of one.
 */
export function cardNumberSpans(text: string): Array<[number, number]> {
  const spans: Array<[number, number]> = [];
  for (const run of text.matchAll(digitRuns)) {
    const groups = [...run[0].matchAll(digitGroups)].map((group) => ({
      start: run.index + group.index,
      digits: group[0],
    }));
    groups.forEach((first, from) => {
      let digits = "";
      for (const last of groups.slice(from)) {
        digits += last.digits;
        if (digits.length > 19) break;
        if (isCardNumber(digits)) spans.push([first.start, last.start + last.digits.length]);
      }
    });
  }
  return spans;
}

export function containsCardNumber(text: string): boolean {
  return cardNumberSpans(text).length > 0;
}

/** `text` with the digits of every card number in it starred but its last four, separators kept. */
export function maskCardNumbers(text: string): string {
  const spans = cardNumberSpans(text);
  if (spans.length === 0) return text;
  const characters = text.split("");
  for (const [start, end] of spans) {
    let kept = 0;
    for (let at = end - 1; at >= start; at--) {
      // Digits of the text as given: where spans overlap, each keeps its own last four at most.
      if (!/[0-9]/.test(text[at] ?? "")) continue;
      if (kept < 4) kept += 1;
      else characters[at] = "*";
    }
  }
  return characters.join("");
}
