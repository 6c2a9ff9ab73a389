import { type Static, type TSchema, Type } from "typebox";
import { invalidField } from "../errors.ts";
import { limits } from "../limits.ts";
import { invisibleCategories } from "../text.ts";
import { EnvelopeSchema, ErrorEnvelopeSchema } from "./envelope.ts";

/**
 * Schema pieces shared by every module. `x-message` gives a failed pattern a human rule;
 * `x-decimals` bounds the decimals of a JSON number (see validation.ts).
 */
export const Uuid = (description?: string) =>
  Type.String({ format: "uuid", "x-message": "must be a UUID", ...(description ? { description } : {}) });

/**
 * Text that names or identifies something rather than says it (an RFC, a document number, the
 * client's own reference): bounded and, when required, not blank, but a long number in it is what
 * it should be, not a card number to refuse.
 */
export const Identifier = (min: number, max: number, description?: string) =>
  Type.String({
    minLength: min,
    maxLength: max,
    ...(min >= 1 ? { "x-not-blank": true } : {}),
    ...(description ? { description } : {}),
  });

/**
 * Free text of min-max characters; when it is required (min >= 1), spaces alone are refused (rule
 * `blank`). A card number in it is refused (rule `card_number`, code 1010): free text is stored,
 * answered and sent on as written, and a card number must never be kept readable.
 */
export const Text = (min: number, max: number, description?: string) =>
  Type.String({
    ...Identifier(min, max, description),
    "x-no-card-number": true,
  });

/**
 * Free text without control or invisible characters (text.ts): for what must read as it is stored,
 * a client's alias, and what goes to the SPEI rail, where a receiving bank returns text with
 * control characters and a bidirectional override shows a name or concept in another order.
 */
export const VisibleText = (min: number, max: number, description?: string) =>
  Type.String({
    ...Text(min, max, description),
    pattern: `^[^${invisibleCategories}]*$`,
    "x-message": "must not contain control or invisible characters",
  });

export const Digits = (count: number, description?: string) =>
  Type.String({
    pattern: `^[0-9]{${count}}$`,
    "x-message": `must be exactly ${count} digits`,
    ...(description ? { description } : {}),
  });

export const DigitsBetween = (min: number, max: number, description?: string) =>
  Type.String({
    pattern: `^[0-9]{${min},${max}}$`,
    "x-message": `must be ${min}-${max} digits`,
    ...(description ? { description } : {}),
  });

export const Email = (description?: string) =>
  Type.String({
    format: "email",
    maxLength: 100,
    "x-message": "must be an email address",
    ...(description ? { description } : {}),
  });

/** The largest amount (centavos) as the JSON number of pesos a schema's `maximum` states. */
const pesosMaximum = (maxCents: bigint | undefined) =>
  maxCents === undefined ? {} : { maximum: Number(maxCents) / 100 };

/**
 * A peso amount: a JSON number, positive, at most 2 decimals (e.g. 150.5), and at most `maxCents`
 * when given (stated in the OpenAPI document as `maximum`; the service's code checks it again).
 */
export const Pesos = (description?: string, maxCents?: bigint) =>
  Type.Number({
    exclusiveMinimum: 0,
    "x-decimals": 2,
    ...pesosMaximum(maxCents),
    ...(description ? { description } : { description: "MXN, at most 2 decimals" }),
  });

/** A non-negative peso amount (incomes, commissions). */
export const PesosOrZero = (description?: string, maxCents?: bigint) =>
  Type.Number({
    minimum: 0,
    "x-decimals": 2,
    ...pesosMaximum(maxCents),
    ...(description ? { description } : {}),
  });

export const Latitude = Type.Number({
  minimum: -90,
  maximum: 90,
  "x-decimals": 5,
  description: "Degrees, -90 to 90 (south negative), at most 5 decimals",
});
export const Longitude = Type.Number({
  minimum: -180,
  maximum: 180,
  "x-decimals": 5,
  description: "Degrees, -180 to 180 (west negative), at most 5 decimals",
});

/** YYYY-MM-DD that names a real calendar day. */
export const DateString = (description?: string) =>
  Type.String({
    format: "date",
    // Year 0000 is a date to ajv but not to PostgreSQL.
    pattern: "^(?!0000)[0-9]{4}-[0-9]{2}-[0-9]{2}$",
    "x-message": "must be a real date YYYY-MM-DD",
    ...(description ? { description } : {}),
  });

// The instants PostgreSQL and Date.prototype.toISOString both write as YYYY: years 1 to 9999, UTC.
const earliestInstant = Date.parse("0001-01-01T00:00:00.000Z");
const latestInstant = Date.parse("9999-12-31T23:59:59.999Z");

/** A timestamp a client sent (ISO 8601 text or epoch milliseconds), within years 0001-9999 UTC. */
export function instantOf(value: string | number, field: string): Date {
  const date = new Date(value);
  const time = date.getTime();
  if (Number.isNaN(time)) throw invalidField(field, "format", "must be a timestamp");
  if (time < earliestInstant || time > latestInstant) {
    throw invalidField(field, "range", "must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z");
  }
  return date;
}

/**
 * A listing's `created_from` (inclusive) and `created_to` (exclusive). An empty window is a
 * mistake, as a listing's init_date after its end_date is: 1000 on created_to, not an empty list.
 */
export function createdWindow(from: string | undefined, to: string | undefined) {
  const createdFrom = from === undefined ? undefined : instantOf(from, "created_from");
  const createdTo = to === undefined ? undefined : instantOf(to, "created_to");
  if (createdFrom && createdTo && createdFrom >= createdTo)
    throw invalidField("created_to", "range", "must be after created_from");
  return { createdFrom, createdTo };
}

/**
 * A response value that may be null, as one schema with a list of types (`["string", "null"]`;
 * OpenAPI 3.1). fast-json-stringify serializes a union (`anyOf`) by running a validator per
 * branch on every value, formats included; a list of types is a `typeof` test.
 */
export function OrNull<T extends TSchema & { type: string }>(
  schema: T,
  options: { description?: string } = {},
) {
  const { type, ...rest } = schema as { type: string } & Record<string, unknown>;
  return Type.Unsafe<Static<T> | null>({ ...rest, ...options, type: [type, "null"] });
}

/** A listing's page size. */
export const PerPage = Type.Optional(
  Type.Integer({ minimum: 1, maximum: limits.pageSizeMax, default: limits.pageSizeDefault }),
);

const pageWindow = limits.pageWindowRowsMax.toLocaleString("en-US");

/**
 * `page` and `per_page` of a listing read by page number, `cursor` telling whether it also takes a
 * cursor. How deep a page may go depends on per_page, so pageOf() checks it, not the schema.
 */
export function PageQuery(options: { cursor: boolean }) {
  const further = options.cursor ? "; read further with cursor (each page's next_cursor)" : "";
  return {
    page: Type.Optional(
      Type.Integer({
        minimum: 1,
        default: 1,
        description: `From 1. Pages reach the first ${pageWindow} rows: page × per_page is at most ${pageWindow}${further}`,
      }),
    ),
    per_page: PerPage,
  };
}

/**
 * The page and page size a listing reads, from its query. A page number reaches the first
 * `limits.pageWindowRowsMax` rows, whatever the listing, as search engines bound their result
 * window: a deeper page is refused (1000 on `page`), pointing to the cursor where the listing has
 * one. A cursor, when sent, wins over `page`, which is then not checked.
 */
export function pageOf(
  query: { page?: number | undefined; per_page?: number | undefined; cursor?: string | undefined },
  options: { cursor: boolean },
): { page: number; perPage: number } {
  const page = query.page ?? 1;
  const perPage = query.per_page ?? limits.pageSizeDefault;
  if (query.cursor !== undefined || page * perPage <= limits.pageWindowRowsMax) return { page, perPage };
  const last = Math.floor(limits.pageWindowRowsMax / perPage);
  const further = options.cursor ? "; read further with cursor, passing each page's next_cursor" : "";
  throw invalidField(
    "page",
    "maximum",
    `must be at most ${last} with per_page ${perPage}: pages reach the first ${pageWindow} rows${further}`,
  );
}

/** A listing's `cursor`: the `next_cursor` of its previous page. */
export function CursorQuery(description: string) {
  return Type.Optional(Type.String({ minLength: 1, maxLength: limits.cursorLengthMax, description }));
}

/** A page's `next_cursor`: where the next page starts; null on the last page. */
export function NextCursor(
  description = "Pass as cursor (same filters and per_page) for the next page; null on the last page",
) {
  return OrNull(Type.String(), { description });
}

/** A listing's creation window, read by createdWindow(). */
export const CreatedWindowQuery = {
  created_from: Type.Optional(
    Type.String({
      format: "date-time",
      "x-message": "must be an ISO 8601 date-time",
      description: "Inclusive",
    }),
  ),
  created_to: Type.Optional(
    Type.String({
      format: "date-time",
      "x-message": "must be an ISO 8601 date-time",
      description: "Exclusive",
    }),
  ),
};

/**
 * Headers a response carries, as the OpenAPI document states them: a response schema's `headers`
 * (name to schema), which @fastify/swagger turns into the response's headers and Fastify's
 * serializer ignores (it writes the same code with or without them).
 */
export type ResponseHeaders = Record<
  string,
  { type: "string" | "integer"; description: string; enum?: string[]; pattern?: string; minimum?: number }
>;

/** The header noStore() (http/envelope.ts) sets on an answer that holds a secret. */
export const NoStoreHeader: ResponseHeaders = {
  "Cache-Control": {
    type: "string",
    enum: ["no-store"],
    description: "The answer holds a secret: no cache may keep it.",
  },
};

/**
 * The response map of a route: its success envelope (with the headers its code sets, if any) plus
 * the shared error envelope. The document adds the responses hooks answer (http/openapi.ts).
 */
export function responses<T extends TSchema>(
  data: T,
  options: { description?: string; headers?: ResponseHeaders } = {},
) {
  return {
    200: EnvelopeSchema(data, options.description, options.headers),
    "4xx": ErrorEnvelopeSchema,
    "5xx": ErrorEnvelopeSchema,
  };
}

export const bearerAuth = [{ bearerAuth: [] }];
