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

export function encodeCursor(cursor: Cursor): string {
  const text = JSON.stringify({ d: cursor.fecha, s: cursor.seq.toString(), p: cursor.page });
  return Buffer.from(text, "utf8").toString("base64url");
}

export function decodeCursor(text: string): Cursor {
  const invalid = () => invalidField("cursor", "cursor", "must be a next_cursor returned by this listing");
  if (text.length > limits.transferCursorLengthMax || !/^[A-Za-z0-9_-]+$/.test(text)) throw invalid();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
  } catch {
    throw invalid();
  }
  const { d, s, p } = (parsed ?? {}) as { d?: unknown; s?: unknown; p?: unknown };
  if (
    typeof d !== "string" ||
    !isRealDate(d) ||
    typeof s !== "string" ||
    !/^[1-9][0-9]{0,17}$/.test(s) ||
    typeof p !== "number" ||
    !Number.isInteger(p) ||
    p < 1 ||
    p >= limits.pageNumberMax
  ) {
    throw invalid();
  }
  return { fecha: d, seq: BigInt(s), page: p };
}
