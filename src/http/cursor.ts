import { createHash } from "node:crypto";
import { type RawBuilder, sql } from "kysely";
import { invalidField } from "../errors.ts";
import { limits } from "../limits.ts";

/**
 * Opaque page cursors: base64url JSON of a listing's position plus a short digest of the listing
 * it belongs to (its filters and page size). The digest is not a secret: it only catches a cursor
 * passed back with another listing's query, which is refused rather than read as a position in it.
 * What a position holds, and its checks, are the listing's own.
 */
export type CursorFields = Record<string, string | number>;

function listingTag(listing: readonly (string | number)[]): string {
  return createHash("sha256").update(listing.join("\n")).digest("base64url").slice(0, 12);
}

export function encodeCursor(position: CursorFields, listing: readonly (string | number)[]): string {
  return Buffer.from(JSON.stringify({ ...position, q: listingTag(listing) }), "utf8").toString("base64url");
}

/**
 * The fields of a cursor made by `encodeCursor` for this listing, for the caller to check. Text
 * that is not such a cursor is 1000 on `cursor`; a cursor of another listing is 1000 with
 * `otherListing` saying what has to match.
 */
export function decodeCursor(
  text: string,
  listing: readonly (string | number)[],
  otherListing: string,
): Record<string, unknown> {
  if (text.length > limits.cursorLengthMax || !/^[A-Za-z0-9_-]+$/.test(text)) throw invalidCursor();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
  } catch {
    throw invalidCursor();
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw invalidCursor();
  const fields = parsed as Record<string, unknown>;
  if (typeof fields.q !== "string") throw invalidCursor();
  if (fields.q !== listingTag(listing)) throw invalidField("cursor", "cursor", otherListing);
  return fields;
}

/**
 * A page of a listing that read `perPage + 1` rows: the first `perPage`, and the cursor of the
 * last of them when the extra row says more follow (null on the last page).
 */
export function keysetPage<R>(
  rows: R[],
  perPage: number,
  positionOf: (last: R) => CursorFields,
  listing: readonly (string | number)[],
): { items: R[]; nextCursor: string | null } {
  const items = rows.slice(0, perPage);
  const last = items.at(-1);
  return {
    items,
    nextCursor: rows.length > perPage && last !== undefined ? encodeCursor(positionOf(last), listing) : null,
  };
}

export function invalidCursor() {
  return invalidField("cursor", "cursor", "must be a next_cursor returned by this listing");
}

/** A page number carried in a cursor: the page its last row was on. */
export function isCursorPage(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= 1 && value < limits.pageNumberMax;
}

/** What a listing's cursor of another listing is told. */
export const otherFiltersMessage =
  "was returned for other filters or another per_page: pass it with the query that returned it";

/** A timestamp column as SQL text in the form decodeInstantIdCursor reads back (a cursor's `t`). */
export function instantKey(column: string): RawBuilder<string> {
  return sql<string>`to_char(${sql.ref(column)} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
}

/**
 * A keyset position of (instant, id): the instant as the database writes it to the microsecond
 * (YYYY-MM-DDTHH:MM:SS.ffffffZ, UTC) and a UUID. Both are checked before they reach a query, so a
 * forged cursor naming 30 February or hour 25 is 1000, not a database error.
 */
export function decodeInstantIdCursor(
  text: string,
  listing: readonly (string | number)[],
): { at: string; id: string } {
  const { t, i } = decodeCursor(text, listing, otherFiltersMessage);
  if (typeof t !== "string" || !isUtcInstant(t) || typeof i !== "string" || !uuidPattern.test(i))
    throw invalidCursor();
  return { at: t, id: i };
}

/**
 * One page of a listing read newest first by (instant, id): the cursor, if any, is decoded against
 * `listing` before anything is read, then `read` gets the position to start below and the rows to
 * read (`perPage + 1`), and the page ends with the cursor of its last row (`instantOf` it, its id).
 */
export async function instantIdPage<R extends { id: string }>(
  query: { perPage: number; cursor?: string | undefined },
  listing: readonly (string | number)[],
  read: (before: { at: string; id: string } | undefined, limit: number) => Promise<R[]>,
  instantOf: (row: R) => string,
): Promise<{ items: R[]; nextCursor: string | null }> {
  const before = query.cursor === undefined ? undefined : decodeInstantIdCursor(query.cursor, listing);
  const rows = await read(before, query.perPage + 1);
  return keysetPage(rows, query.perPage, (last) => ({ t: instantOf(last), i: last.id }), listing);
}

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function isUtcInstant(text: string): boolean {
  if (!/^(19[7-9][0-9]|[2-9][0-9]{3})-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$/.test(text))
    return false;
  const millis = `${text.slice(0, 23)}Z`;
  const date = new Date(millis);
  return !Number.isNaN(date.getTime()) && date.toISOString() === millis;
}
