import { isRealDate } from "../../domain/spei.ts";
import {
  decodeCursor as decodePosition,
  encodeCursor as encodePosition,
  invalidCursor,
  isCursorPage,
} from "../../http/cursor.ts";

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

function listingKey(query: ListingQuery) {
  return [query.clabe, query.initDate, query.endDate, query.perPage];
}

export function encodeCursor(cursor: Cursor, query: ListingQuery): string {
  return encodePosition({ d: cursor.fecha, s: cursor.seq.toString(), p: cursor.page }, listingKey(query));
}

/**
 * The position a cursor continues from. A cursor passed with another CLABE, other dates or
 * another per_page would continue a listing it was not made for (page numbers and positions of
 * another query): it is refused, not reinterpreted.
 */
export function decodeCursor(text: string, query: ListingQuery): Cursor {
  const { d, s, p } = decodePosition(
    text,
    listingKey(query),
    "was returned for another CLABE, other dates or another per_page: pass it with the query that returned it",
  );
  if (
    typeof d !== "string" ||
    !isRealDate(d) ||
    typeof s !== "string" ||
    !/^[1-9][0-9]{0,17}$/.test(s) ||
    !isCursorPage(p)
  ) {
    throw invalidCursor();
  }
  return { fecha: d, seq: BigInt(s), page: p };
}
