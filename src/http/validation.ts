import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import type { FastifyInstance, FastifySchemaCompiler } from "fastify";
import { containsCardNumber } from "../domain/luhn.ts";
import { type AppError, cardNumberRule, type ValidationDetail, validationError } from "../errors.ts";
import { limits } from "../limits.ts";

/**
 * Request validation. Bodies are validated without coercion ("100" is not an amount) and with
 * unknown fields rejected; query strings and path parameters arrive as text, so they are coerced
 * to the declared types. Failures become catalog error 1000 with one detail per failed rule
 * (error-handler.ts), naming the field and the rule.
 */
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/** Decimals of a finite number as its shortest form writes them (1e+300 has none, 1.5e-7 eight). */
function decimalsOf(value: number): number | undefined {
  if (!Number.isFinite(value)) return undefined;
  const [mantissa = "", exponent = "0"] = String(value).split("e");
  return Math.max(0, (mantissa.split(".")[1]?.length ?? 0) - Number(exponent));
}

function makeAjv(coerce: boolean): Ajv {
  const ajv = new Ajv({
    allErrors: true,
    coerceTypes: coerce,
    useDefaults: true,
    removeAdditional: false,
    strict: false,
    verbose: true,
  });
  addFormats(ajv);
  // ajv-formats' uuid also takes "urn:uuid:<uuid>", which PostgreSQL's uuid type refuses (a 500).
  ajv.addFormat("uuid", /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
  ajv.addKeyword({ keyword: "x-message", schemaType: "string" });
  ajv.addKeyword({
    keyword: "x-decimals",
    type: "number",
    schemaType: "number",
    errors: true,
    validate: function validateDecimals(max: number, value: number) {
      const decimals = decimalsOf(value);
      if (decimals !== undefined && decimals <= max) return true;
      (validateDecimals as unknown as { errors: Partial<ErrorObject>[] }).errors = [
        { keyword: "x-decimals", params: { max }, message: `must have at most ${max} decimals` },
      ];
      return false;
    },
  });
  // Text that must say something: a value of spaces only ("   " as a first name) is refused.
  // An empty value is left to minLength, so it gets one error, not two.
  ajv.addKeyword({
    keyword: "x-not-blank",
    type: "string",
    schemaType: "boolean",
    errors: true,
    validate: function validateNotBlank(enabled: boolean, value: string) {
      if (!enabled || value.length === 0 || /\S/.test(value)) return true;
      (validateNotBlank as unknown as { errors: Partial<ErrorObject>[] }).errors = [
        { keyword: "blank", params: {}, message: "must not be blank" },
      ];
      return false;
    },
  });
  // Free text is stored, answered and sent on as written: a card number in it would be kept
  // readable (PCI DSS 3.5.1). The rule's own code (1010) is chosen by validationError().
  ajv.addKeyword({
    keyword: "x-no-card-number",
    type: "string",
    schemaType: "boolean",
    errors: true,
    validate: function validateNoCardNumber(enabled: boolean, value: string) {
      if (!enabled || !containsCardNumber(value)) return true;
      (validateNoCardNumber as unknown as { errors: Partial<ErrorObject>[] }).errors = [
        { keyword: cardNumberRule, params: {}, message: "must not contain a card number" },
      ];
      return false;
    },
  });
  return ajv;
}

const bodyAjv = makeAjv(false);
const textAjv = makeAjv(true);

/**
 * Text PostgreSQL cannot store: U+0000 (text and jsonb refuse it, SQLSTATE 22021) and a lone
 * UTF-16 surrogate ("\ud800" is valid JSON, but jsonb refuses it, 22P02, and text would silently
 * store U+FFFD instead). Such a value passed the schema and failed at the INSERT as a 500; it is
 * refused here instead, naming the field, for every validated part (body, query, params).
 */
const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const isUnstorable = (text: string) => text.includes("\u0000") || loneSurrogate.test(text);

/** The JSON Pointer of the first string (or object key) holding unstorable text. */
function firstUnstorable(value: unknown): string | undefined {
  return unstorablePath(value)
    ?.map((key) => `/${key.replace(/~/g, "~0").replace(/\//g, "~1")}`)
    .join("");
}

/** The keys down to the first unstorable text, written only once it is found. */
function unstorablePath(value: unknown): string[] | undefined {
  if (typeof value === "string") return isUnstorable(value) ? [] : undefined;
  if (value === null || typeof value !== "object") return undefined;
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (isUnstorable(key)) return [key];
    const inner = unstorablePath(record[key]);
    if (inner !== undefined) {
      inner.unshift(key);
      return inner;
    }
  }
  return undefined;
}

const unstorableEverywhere = new RegExp(`\u0000|${loneSurrogate.source}`, "g");

/**
 * The value with every NUL and unpaired surrogate (in strings and keys) replaced by U+FFFD: for
 * the rail's callbacks, which store text as the rail sends it and must not bounce money over a
 * character PostgreSQL cannot store (elsewhere such text is refused with rule `x-text`).
 */
export function replaceUnstorable(value: unknown): unknown {
  return firstUnstorable(value) === undefined ? value : replaced(value);
}

function replaced(value: unknown): unknown {
  if (typeof value === "string") return value.replace(unstorableEverywhere, "\ufffd");
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(replaced);
  const result: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    // defineProperty: a key "__proto__" stays a key (the JSON parser refuses one anyway).
    Object.defineProperty(result, replaced(key) as string, {
      value: replaced(item),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return result;
}

/**
 * Query and path numbers are decimal digits. Ajv's coercion reads a text the way `Number()` does,
 * so `0x10`, `1e1`, ` 16` and `16.0` would all be page 16 or 10; they are refused instead, as in
 * a JSON body, where `"10"` is not a number.
 */
const decimalText: Record<string, RegExp> = {
  // Any number of digits: one too large is then "must be at most 100", not "must be an integer".
  integer: /^-?[0-9]+$/,
  number: /^-?[0-9]+(\.[0-9]+)?$/,
};

/** The integer and number properties of a flat query or path schema, with the text each takes. */
function numericTexts(schema: unknown): Array<[string, string, RegExp]> {
  const properties = (schema as { properties?: Record<string, { type?: unknown }> }).properties ?? {};
  const found: Array<[string, string, RegExp]> = [];
  for (const [name, property] of Object.entries(properties)) {
    const pattern = typeof property.type === "string" ? decimalText[property.type] : undefined;
    if (pattern) found.push([name, String(property.type), pattern]);
  }
  return found;
}

function notDecimal(data: unknown, numeric: Array<[string, string, RegExp]>): ErrorObject | undefined {
  if (numeric.length === 0 || data === null || typeof data !== "object") return undefined;
  for (const [name, type, pattern] of numeric) {
    const value = (data as Record<string, unknown>)[name];
    if (typeof value === "string" && !pattern.test(value)) {
      return { instancePath: `/${name}`, schemaPath: "", keyword: "type", params: { type }, message: "" };
    }
  }
  return undefined;
}

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) => {
  const ajv = httpPart === "body" ? bodyAjv : textAjv;
  const validate = ajv.compile(schema as object) as ValidateFunction;
  const numeric = httpPart === "body" ? [] : numericTexts(schema);
  const checked = ((data: unknown) => {
    const textual = notDecimal(data, numeric);
    if (textual) {
      checked.errors = [textual];
      return false;
    }
    const bad = firstUnstorable(data);
    if (bad !== undefined) {
      checked.errors = [
        {
          instancePath: bad,
          schemaPath: "",
          keyword: "x-text",
          params: {},
          message: "must not contain a NUL character or an unpaired surrogate",
        },
      ];
      return false;
    }
    const valid = validate(data);
    checked.errors = validate.errors;
    return valid;
  }) as ValidateFunction;
  return checked;
};

function fieldOf(error: ErrorObject, context: string | undefined): string {
  const path = error.instancePath
    .split("/")
    .filter(Boolean)
    .map((part) => part.replace(/~1/g, "/").replace(/~0/g, "~"));
  if (error.keyword === "required") path.push(String(error.params.missingProperty));
  if (error.keyword === "additionalProperties") path.push(String(error.params.additionalProperty));
  if (path.length === 0) return context === "body" ? "body" : (context ?? "request");
  return path.join(".");
}

const comparisonWords: Record<string, string> = {
  "<=": "at most",
  ">=": "at least",
  "<": "less than",
  ">": "greater than",
};

function messageOf(error: ErrorObject): string {
  const custom = (error.parentSchema as Record<string, unknown> | undefined)?.["x-message"];
  switch (error.keyword) {
    case "required":
      return "is required";
    case "additionalProperties":
      return "is not a known field";
    case "type":
      return `must be ${/^[aeiou]/.test(String(error.params.type)) ? "an" : "a"} ${error.params.type}`;
    case "minLength":
      return `must be at least ${error.params.limit} characters`;
    case "maxLength":
      return `must be at most ${error.params.limit} characters`;
    case "minimum":
    case "exclusiveMinimum":
    case "maximum":
    case "exclusiveMaximum":
      return `must be ${comparisonWords[String(error.params.comparison)] ?? error.params.comparison} ${error.params.limit}`;
    case "enum":
      // A long list (the 32 states) reads better as a pointer to its catalog.
      if (typeof custom === "string") return custom;
      return `must be one of ${(error.params.allowedValues as unknown[]).join(", ")}`;
    case "const":
      return `must be ${JSON.stringify(error.params.allowedValue)}`;
    case "pattern":
    case "format":
      return typeof custom === "string" ? custom : `must be a valid ${error.params.format ?? "value"}`;
    // The keywords of makeAjv() word their own rule; a schema's x-message is about another one.
    case "blank":
    case cardNumberRule:
      return error.message ?? "is invalid";
    default:
      return typeof custom === "string" ? custom : (error.message ?? "is invalid");
  }
}

/**
 * A check of one value against a body schema, answering the catalog error a body failing it gets
 * (1000 with its details), or undefined: for a clearing file's lines, each checked alone so that a
 * bad line refuses only itself.
 */
export function bodyChecker(schema: object): (value: unknown) => AppError | undefined {
  const validate = bodyAjv.compile(schema) as ValidateFunction;
  return (value) => {
    if (validate(value)) return undefined;
    const { details, total } = validationDetails(validate.errors ?? [], "line");
    return validationError(details, total);
  };
}

/**
 * The failed rules of ajv's errors, one per field and rule: the first `limits.validationDetailsMax`
 * of them, and how many there are. Only the listed ones get a message written.
 */
export function validationDetails(
  errors: ErrorObject[],
  context: string | undefined,
): { details: ValidationDetail[]; total: number } {
  const seen = new Set<string>();
  const details: ValidationDetail[] = [];
  // A union of literals (B2B | B2C | CUSTOM) fails once per literal: one detail lists them all.
  const allowed = new Map<string, unknown[]>();
  for (const error of errors) {
    if (error.keyword !== "const") continue;
    const field = fieldOf(error, context);
    allowed.set(field, [...(allowed.get(field) ?? []), error.params.allowedValue]);
  }
  for (const error of errors) {
    // anyOf/oneOf add a summary after their branches' errors; the branches say more.
    if (error.keyword === "anyOf" || error.keyword === "oneOf" || error.keyword === "if") continue;
    // One rule of one field, as ajv names them (a union's branches may repeat it): counted from
    // ajv's own text, so that a field's name is only written for the rules listed.
    const named = error.params.missingProperty ?? error.params.additionalProperty ?? "";
    const key = `${error.instancePath}\u0000${named}\u0000${error.keyword}`;
    if (seen.has(key)) continue;
    seen.add(key);
    // Past the cap only a card number is still listed (in the last place), so its code, 1010,
    // is the answer whatever else failed.
    const full = details.length === limits.validationDetailsMax;
    if (full && (error.keyword !== cardNumberRule || details.some((d) => d.rule === cardNumberRule)))
      continue;
    if (full) details.pop();
    const field = fieldOf(error, context);
    const values = error.keyword === "const" ? (allowed.get(field) ?? []) : [];
    const rule = values.length > 1 ? "enum" : error.keyword;
    const message =
      values.length > 1
        ? `must be one of ${values.map((v) => JSON.stringify(v)).join(", ")}`
        : messageOf(error);
    details.push({ field, rule, message });
  }
  return { details, total: seen.size };
}

/**
 * A query parameter no route reads is refused (1000, "is not a known field") on every /v1 route,
 * as an unknown body field is: a misspelt `per_page` or a filter the route does not have must not
 * quietly answer the unfiltered list. Routes that declare their query list it; the others take
 * none. The rail callbacks are left alone: a rail adding a parameter must not bounce money.
 */
export function registerStrictQuery(app: FastifyInstance): void {
  app.addHook("onRoute", (route) => {
    if (!route.url.startsWith("/v1/") || route.url.startsWith("/v1/rails/")) return;
    if (route.schema?.querystring !== undefined) return;
    route.schema = {
      ...route.schema,
      querystring: { type: "object", properties: {}, additionalProperties: false },
    };
  });
}
