import { randomInt } from "node:crypto";

/**
 * SPEI facts (domain-mx §6): Banxico return causes, account types by length, tracking keys and
 * the operation date. Pure: no I/O.
 */

/** Banxico return causes (causas de devolución), by their two-digit code. */
export const returnCauses: Readonly<Record<string, string>> = {
  "01": "Cuenta inexistente",
  "02": "Cuenta bloqueada",
  "03": "Cuenta cancelada",
  "05": "Cuenta en otra divisa",
  "06": "Cuenta no pertenece al participante receptor",
  "14": "Falta información mandatoria para completar el pago",
  "15": "Tipo de pago erróneo",
  "16": "Tipo de operación errónea",
  "17": "Tipo de cuenta no corresponde",
  "19": "Carácter inválido",
  "20": "Excede el límite de saldo autorizado de la cuenta",
  "21": "Excede el límite de abonos permitidos en el mes en la cuenta",
  "22": "Número de línea de telefonía móvil no registrado",
  "23": "Cuenta adicional no recibe pagos que no proceden de Banxico",
  "25": "Falta instrucción de dispersión al alcanzar el límite de saldo",
  "26": "Resolución del convenio de colaboración para la protección del cliente emisor",
  "27": "Pago opcional no aceptado por el receptor",
  "28": "Pago CoDi sin aviso en tiempo reducido",
  "30": "Clave de rastreo duplicada para el emisor y día de operación",
  "31": "Certificado del emisor vencido",
};

export function isReturnCause(code: string): boolean {
  return Object.hasOwn(returnCauses, code);
}

export function returnCauseText(code: string): string {
  return returnCauses[code] ?? "Causa desconocida";
}

export type AccountType = "PHONE" | "CARD" | "CLABE";

/** SPEI's account-type codes (tipo de cuenta): 10 mobile phone, 3 debit card, 40 CLABE. */
export const accountTypeCodes: Readonly<Record<AccountType, string>> = {
  PHONE: "10",
  CARD: "3",
  CLABE: "40",
};

/** The account type a beneficiary account of this many digits is (10, 16 or 18), if any. */
export function accountTypeOf(account: string): AccountType | undefined {
  if (/^[0-9]{10}$/.test(account)) return "PHONE";
  if (/^[0-9]{16}$/.test(account)) return "CARD";
  if (/^[0-9]{18}$/.test(account)) return "CLABE";
  return undefined;
}

export const trackingKeyLengthMax = 30;
const trackingAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";

/**
 * A new tracking key: "EMS", the operation date (YYYYMMDD) and 12 random base-36 characters
 * (23 alphanumerics; 36^12 keys per day). Uniqueness per day is enforced by the database; a
 * collision is retried with a fresh key.
 */
export function newTrackingKey(operationDate: string): string {
  let random = "";
  for (let i = 0; i < 12; i++) random += trackingAlphabet[randomInt(trackingAlphabet.length)];
  return `EMS${operationDate.replace(/-/g, "")}${random}`;
}

/**
 * The operation date (YYYY-MM-DD) a key of `newTrackingKey` carries; undefined for any other key,
 * including one shaped like it whose date does not exist (20251340): it names no order of Emisor's.
 */
export function trackingKeyDate(key: string): string | undefined {
  const found = /^EMS(\d{4})(\d{2})(\d{2})[0-9A-Z]{12}$/i.exec(key);
  if (!found) return undefined;
  const date = `${found[1]}-${found[2]}-${found[3]}`;
  return isRealDate(date) ? date : undefined;
}

export function isTrackingKey(key: string): boolean {
  return new RegExp(`^[0-9A-Za-z]{1,${trackingKeyLengthMax}}$`).test(key);
}

const mexicoCityDate = new Intl.DateTimeFormat("en-CA", {
  timeZone: "America/Mexico_City",
  year: "numeric",
  month: "2-digit",
  day: "2-digit",
});

/**
 * The SPEI operation date of an instant: its calendar day in Mexico City (YYYY-MM-DD). SPEI runs
 * all day every day; Emisor does not model the participant's end-of-day cut-off.
 */
export function operationDateOf(instant: Date): string {
  return mexicoCityDate.format(instant);
}

let today = { date: "", from: 0, until: 0 };

/**
 * Today in Mexico City (YYYY-MM-DD), worked out at most once a second, and again whenever the
 * clock leaves that second, backwards too (a clock stepped back must not keep a later date).
 */
export function mexicoCityToday(): string {
  const now = Date.now();
  if (now >= today.until || now < today.from) {
    today = { date: mexicoCityDate.format(now), from: now, until: now + 1000 };
  }
  return today.date;
}

/** True when `text` is YYYY-MM-DD naming a real calendar day. */
export function isRealDate(text: string): boolean {
  // Year 0000 is a day to Date but not to PostgreSQL.
  if (!/^[0-9]{4}-[0-9]{2}-[0-9]{2}$/.test(text) || text.startsWith("0000")) return false;
  const date = new Date(`${text}T00:00:00Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().slice(0, 10) === text;
}

const mexicoCityClock = new Intl.DateTimeFormat("en-CA", {
  timeZone: "America/Mexico_City",
  hourCycle: "h23",
  year: "numeric",
  month: "2-digit",
  day: "2-digit",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
});

/** How far Mexico City's clock is from UTC at `instant`, in milliseconds (-6 h, -5 h in old summers). */
function mexicoCityOffsetMs(instant: number): number {
  const part = (parts: Intl.DateTimeFormatPart[], type: string) =>
    Number(parts.find((p) => p.type === type)?.value);
  const parts = mexicoCityClock.formatToParts(instant);
  const asUtc = Date.UTC(
    part(parts, "year"),
    part(parts, "month") - 1,
    part(parts, "day"),
    part(parts, "hour"),
    part(parts, "minute"),
    part(parts, "second"),
  );
  return asUtc - Math.floor(instant / 1000) * 1000;
}

/**
 * The instant a Mexico City wall-clock time (YYYY-MM-DDTHH:MM:SS[.fff], no zone) names, as SPEI
 * participants write their times; undefined when it is no time at all.
 */
export function mexicoCityInstant(local: string): Date | undefined {
  const wall = Date.parse(`${local}Z`);
  if (Number.isNaN(wall)) return undefined;
  const first = wall - mexicoCityOffsetMs(wall);
  return new Date(wall - mexicoCityOffsetMs(first));
}

/** Whole days from `from` to `to` (both YYYY-MM-DD). */
export function daysBetween(from: string, to: string): number {
  return Math.round((Date.parse(`${to}T00:00:00Z`) - Date.parse(`${from}T00:00:00Z`)) / 86_400_000);
}

/**
 * A numeric SPEI code (institution, account type, numeric reference) as its number, whatever the
 * rail sent: 40012, "40012" and "040012" are the same participant, "040" is account type 40. The
 * sender's institution is part of what identifies an abono (with the date and the tracking key):
 * compared as sent, a redelivery written with another number of zeros was credited again. An
 * institution's number is also its catalog key (40012, 90646, and Banxico's own 2001, which
 * padding to five digits turned into "02001", a key the catalog has not).
 */
export function numericCode(value: string | number): string {
  return String(value).replace(/^0+(?=[0-9])/, "");
}
