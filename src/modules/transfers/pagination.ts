import { createHash } from "node:crypto";
import { isRealDate } from "../../domain/spei.ts";
import { invalidField } from "../../errors.ts";
import { limits } from "../../limits.ts";

/**
 * Paging the collection-account listing without OFFSET and without count(*).
 *
 * Every transfer has a dense position `day_seq` (1, 2, 3...) within its (account, operation day),
 * and a counter row per (account, day) holds how many there are. The listing is newest first:
 * days descending, then day_seq descending. So:
 * - total = the sum of the counters of the days in the range (at most the range's days rows);
 * - page N starts at offset (N-1) x per_page: walking the counters newest day first finds the
 *   day it falls in and the day_seq it starts at, and one index range scan from that position
 *   reads the page. A deep page costs what the first one costs.
 * - a cursor is the position of the last row returned: the next page continues strictly after it.
 *   It names the listing it came from (CLABE, dates, per_page) and is refused by any other.
 */
export interface DayCount {
  fecha: string;
  operations: bigint;
}

/** A position in the listing: (day, day_seq). */
export interface Position {
  fecha: string;
  seq: bigint;
}

/**
 * The position of the row at `offset` (0-based) in newest-first order, given the day counters
 * newest first; undefined when the offset is past the end.
 */
export function positionAt(days: readonly DayCount[], offset: bigint): Position | undefined {
  let remaining = offset;
  for (const day of days) {
    if (remaining < day.operations) return { fecha: day.fecha, seq: day.operations - remaining };
    remaining -= day.operations;
  }
  return undefined;
}

export interface Cursor extends Position {
  /** The page the cursor's row was on; the next page is page + 1. */
  page: number;
}

/** What a cursor is bound to: the listing whose page it continues. */
export interface ListingQuery {
  clabe: string;
  initDate: string;
  endDate: string;
  perPage: number;
}

/** A short digest of the listing a cursor belongs to (not a secret: it only catches mix-ups). */
function listingTag(query: ListingQuery): string {
  const text = `${query.clabe}\n${query.initDate}\n${query.endDate}\n${query.perPage}`;
  return createHash("sha256").update(text).digest("base64url").slice(0, 12);
}

export function encodeCursor(cursor: Cursor, query: ListingQuery): string {
  const text = JSON.stringify({
    d: cursor.fecha,
    s: cursor.seq.toString(),
    p: cursor.page,
    q: listingTag(query),
  });
  return Buffer.from(text, "utf8").toString("base64url");
}

/**
 * The position a cursor continues from. A cursor passed with another CLABE, other dates or
 * another per_page would continue a listing it was not made for (page numbers and positions of
 * another query): it is refused, not reinterpreted.
 */
export function decodeCursor(text: string, query: ListingQuery): Cursor {
  const invalid = () => invalidField("cursor", "cursor", "must be a next_cursor returned by this listing");
  if (text.length > limits.transferCursorLengthMax || !/^[A-Za-z0-9_-]+$/.test(text)) throw invalid();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
  } catch {
    throw invalid();
  }
  const { d, s, p, q } = (parsed ?? {}) as { d?: unknown; s?: unknown; p?: unknown; q?: unknown };
  if (
    typeof d !== "string" ||
    !isRealDate(d) ||
    typeof s !== "string" ||
    !/^[1-9][0-9]{0,17}$/.test(s) ||
    typeof p !== "number" ||
    !Number.isInteger(p) ||
    p < 1 ||
    p >= limits.pageNumberMax ||
    typeof q !== "string"
  ) {
    throw invalid();
  }
  if (q !== listingTag(query)) {
    throw invalidField(
      "cursor",
      "cursor",
      "was returned for another CLABE, other dates or another per_page: pass it with the query that returned it",
    );
  }
  return { fecha: d, seq: BigInt(s), page: p };
}
