import type { FastifyInstance, FastifyRequest } from "fastify";
import secureJson from "secure-json-parse";
import { AppError, errors, invalidField, type ValidationDetail } from "../errors.ts";
import { limits } from "../limits.ts";

/**
 * Every JSON body is read here, as bytes, so that what a client sent is what Emisor reads, or the
 * request is refused:
 * - the bytes must be UTF-8 (RFC 8259 8.1): a Latin-1 "JOSÉ" would otherwise be stored as "JOS�";
 *   a `charset` other than UTF-8 in the Content-Type is a 415;
 * - `__proto__` and `constructor.prototype` keys are refused (secure-json-parse, as Fastify does);
 * - nesting is at most `limits.jsonDepthMax` levels: no body needs more, and the code that walks a
 *   body (validation, fingerprints) then never meets a stack deep enough to overflow;
 * - a number must read exactly as written: JSON.parse rounds `0.009999999999999999999` to 0.01 and
 *   `12345678901234567890` to 12345678901234567000, which would turn a refused amount into a
 *   charged one and corrupt a client's reference. A number whose shortest decimal form as a double
 *   is a different number is refused, naming its field; every number of at most 15 significant
 *   digits (and every number a JSON encoder writes from a double) reads exactly;
 * - a member name appears once in its object: JSON.parse keeps the last of `"amount": 0.01,
 *   "amount": 5000000`, while a gateway, a log or a signature check in front of Emisor may read the
 *   first; what moves money must not depend on which.
 */
export function readJsonBody(request: FastifyRequest, raw: Buffer): unknown {
  // No such route: the 404 is the answer, whatever the body.
  if (request.routeOptions.url === undefined) return undefined;
  const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(request.headers["content-type"] ?? "")?.[1];
  if (charset !== undefined && !/^utf-?8$/i.test(charset)) {
    throw new AppError(errors.unsupportedMediaType, {
      message: "Content-Type must be application/json in UTF-8 (the only charset accepted)",
    });
  }
  // Content-Type is required on every call (contract 4), so an operation without a body sees it too.
  const takesBody = request.routeOptions.schema?.body !== undefined;
  if (raw.length === 0) {
    if (takesBody) throw new AppError(errors.bodyRequired);
    return undefined;
  }
  const { text, value } = parseJson(raw, "body");
  if (!takesBody && !isEmptyObject(value)) {
    throw invalidField("body", "none", "this operation takes no body: send none, or {}");
  }
  checkJsonText(text);
  return value;
}

/** UTF-8 text parsed without prototype keys; 1001 otherwise, naming what was read. */
function parseJson(raw: Buffer, subject: "body" | "line"): { text: string; value: unknown } {
  let text: string;
  try {
    text = utf8.decode(raw);
  } catch {
    throw new AppError(errors.malformedJson, {
      message: `The ${subject} is not valid JSON: it is not UTF-8`,
    });
  }
  try {
    return {
      text,
      value: secureJson.parse(text, undefined, { protoAction: "error", constructorAction: "error" }),
    };
  } catch {
    throw subject === "body"
      ? new AppError(errors.malformedJson)
      : new AppError(errors.malformedJson, { message: `The ${subject} is not valid JSON` });
  }
}

/** The text's nesting, numbers and members, as jsonTextProblem checks them: 1000 on the first problem. */
function checkJsonText(text: string): void {
  const problem = jsonTextProblem(text);
  if (problem)
    throw new AppError(errors.validationFailed, {
      message: `${problem.field}: ${problem.message}`,
      details: [problem],
    });
}

/**
 * One JSON text read by the rules of a body above (UTF-8, no prototype keys, nesting, exact
 * numbers, each member once): for the lines of an NDJSON upload, each read alone, so that a line
 * that breaks one is refused by itself with the error a body would get.
 */
export function readJsonText(raw: Buffer): unknown {
  const { text, value } = parseJson(raw, "line");
  checkJsonText(text);
  return value;
}

/** Replaces Fastify's JSON parser (which decodes invalid UTF-8 to U+FFFD) with `readJsonBody`. */
export function registerJsonBody(app: FastifyInstance): void {
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (request, body, done) => {
    try {
      done(null, readJsonBody(request, body as Buffer));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
}

// ignoreBOM false: a leading byte-order mark is dropped, as JSON.parse would not accept it.
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

const numberToken = /-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

/**
 * What makes a JSON text that parsed unacceptable: nesting deeper than `limits.jsonDepthMax`, a
 * number that does not read exactly, or a member name twice in one object. The text must be valid
 * JSON (it is walked, not checked).
 */
export function jsonTextProblem(text: string): ValidationDetail | undefined {
  // The member name (as written) or array index at each open level, for naming the field.
  const path: Array<string | number> = [];
  // The member names seen so far in each open object (decoded), `undefined` for arrays.
  const names: Array<Set<string> | undefined> = [];
  const length = text.length;
  let i = 0;
  while (i < length) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      const end = stringEnd(text, i);
      let next = end + 1;
      while (next < length && isBlank(text.charCodeAt(next))) next++;
      if (text.charCodeAt(next) === 0x3a) {
        // A member name, kept as written (quotes included) to name a field.
        const written = text.slice(i, end + 1);
        path[path.length - 1] = written;
        const seen = names[names.length - 1];
        const name = written.includes("\\") ? (JSON.parse(written) as string) : written.slice(1, -1);
        if (seen?.has(name)) {
          return {
            field: fieldName(path),
            rule: "duplicate",
            message: "is sent twice: send each field once",
          };
        }
        seen?.add(name);
      }
      i = end + 1;
    } else if (c === 0x7b || c === 0x5b) {
      if (path.length === limits.jsonDepthMax) {
        return {
          field: fieldName(path),
          rule: "depth",
          message: `nests deeper than ${limits.jsonDepthMax} levels`,
        };
      }
      path.push(c === 0x5b ? 0 : "");
      names.push(c === 0x5b ? undefined : new Set());
      i++;
    } else if (c === 0x7d || c === 0x5d) {
      path.pop();
      names.pop();
      i++;
    } else if (c === 0x2c) {
      const top = path.length - 1;
      const index = path[top];
      if (typeof index === "number") path[top] = index + 1;
      i++;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      numberToken.lastIndex = i;
      const token = numberToken.exec(text)?.[0] ?? text[i] ?? "";
      if (!readsExactly(token)) {
        return {
          field: fieldName(path),
          rule: "number",
          message: `${token.length > 40 ? `${token.slice(0, 40)}...` : token} cannot be read exactly as a number: send at most 15 significant digits`,
        };
      }
      i += token.length;
    } else {
      i++;
    }
  }
  return undefined;
}

function isEmptyObject(value: unknown): boolean {
  return (
    typeof value === "object" && value !== null && !Array.isArray(value) && Object.keys(value).length === 0
  );
}

function isBlank(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** The index of the quote closing the string that opens at `start`. */
function stringEnd(text: string, start: number): number {
  let end = text.indexOf('"', start + 1);
  for (;;) {
    let backslashes = 0;
    while (text.charCodeAt(end - 1 - backslashes) === 0x5c) backslashes++;
    if (backslashes % 2 === 0) return end;
    end = text.indexOf('"', end + 1);
  }
}

function fieldName(path: Array<string | number>): string {
  const named = path.filter((part) => part !== "");
  if (named.length === 0) return "body";
  return named.map((part) => (typeof part === "string" ? (JSON.parse(part) as string) : part)).join(".");
}

/**
 * True when the number `token` denotes is the one JSON.parse gives. A plain token of at most 15
 * significant digits and under 20 characters always is (a double holds 15 digits, and such a
 * token can neither overflow nor underflow), and one of at most 15 characters needs no counting;
 * anything else is compared with the double's shortest decimal form, digit for digit.
 */
export function readsExactly(token: string): boolean {
  const plain = token.length < 20 && !/[eE]/.test(token);
  if (plain && (token.length <= 15 || significantDigits(token) <= 15)) return true;
  const read = Number(token);
  return Number.isFinite(read) && decimalKey(token) === decimalKey(String(read));
}

function significantDigits(token: string): number {
  return token.replace(/[-.]/g, "").replace(/^0+/, "").replace(/0+$/, "").length;
}

/** A decimal number as sign, digits without leading or trailing zeros, and exponent ("-15e-1"). */
function decimalKey(text: string): string | undefined {
  const match = /^(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$/.exec(text);
  if (!match) return undefined;
  const fraction = match[3] ?? "";
  const digits = `${match[2]}${fraction}`.replace(/^0+/, "");
  if (digits === "") return "0";
  const trimmed = digits.replace(/0+$/, "");
  const exponent = Number(match[4] ?? 0) - fraction.length + (digits.length - trimmed.length);
  return `${match[1]}${trimmed}e${exponent}`;
}
