import { randomInt } from "node:crypto";
import { curpCheckDigit } from "../../src/domain/curp.ts";

/**
 * Request bodies with valid and unique identities: a person's RFC and a CURP with its check
 * digit, an email and a mobile phone no other call of this process has used.
 */
const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
let counter = 0;

function randomLetters(count: number): string {
  let out = "";
  for (let i = 0; i < count; i++) out += letters[randomInt(letters.length)];
  return out;
}

/** A valid CURP born on yymmdd (state Ciudad de México). */
export function validCurp(yymmdd = "900215"): string {
  const body = `${randomLetters(4)}${yymmdd}HDF${randomLetters(3)}${randomInt(10)}`;
  return `${body}${curpCheckDigit(body)}`;
}

/**
 * A person's RFC with homoclave (13 characters), never repeated within this process: its six
 * letters count up from a random start (26^6 of them), so a bench's 12,000 cardholders never
 * collide, where random letters did about once in 40 runs.
 */
export function validPersonRfc(yymmdd = "900215"): string {
  rfcCount += 1;
  let n = (rfcStart + rfcCount) % 26 ** 6;
  let six = "";
  for (let i = 0; i < 6; i++, n = Math.floor(n / 26)) six = letters[n % 26] + six;
  return `${six.slice(0, 4)}${yymmdd}${six.slice(4)}${randomInt(10)}`;
}
const rfcStart = randomInt(26 ** 6);
let rfcCount = 0;

export function uniqueDigits(count: number): string {
  counter += 1;
  const tail = `${process.pid % 1000}${counter}`.padStart(6, "0");
  let head = "";
  while (head.length + tail.length < count) head += String(randomInt(10));
  return `${head}${tail}`.slice(-count);
}

export function cardholderBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    first_name: "Juan",
    second_name: "Carlos",
    surname: "Perez",
    second_surname: "Lopez",
    rfc: validPersonRfc(),
    curp: validCurp(),
    email: `juan.${uniqueDigits(10)}@example.mx`,
    primary_phone: "5555555555",
    mobile_phone: uniqueDigits(10),
    street: "Av. Reforma",
    ext_street_number: "222",
    suburb: "Juarez",
    township: "Cuauhtemoc",
    city: "Ciudad de Mexico",
    state: "CDMX",
    postal_code: "06600",
    birthdate: "1990-02-15",
    gender: "M",
    marital_status: "SOLTERO",
    has_kids: false,
    ...overrides,
  };
}

export function subclientBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name: "Comercial Norte",
    alias: `N${uniqueDigits(6)}`,
    email: "finanzas@norte.example.mx",
    available: 100,
    phone: "5512345678",
    mobile_phone: "5587654321",
    rfc: "CNO200101AB1",
    street: "Insurgentes Sur",
    ext_street_number: "1000",
    suburb: "Del Valle",
    township: "Benito Juarez",
    city: "Ciudad de Mexico",
    state: "CDMX",
    postal_code: "03100",
    contact_name: "Ana",
    contact_surname: "Garcia",
    contact_email: "ana@norte.example.mx",
    contact_telephone_country_code: "52",
    contact_telephone: "5512345678",
    contact_mobile_phone_country_code: "52",
    contact_mobile_phone: "5587654321",
    api_key_name: "Norte production",
    api_key_password: "correct horse battery",
    ...overrides,
  };
}
