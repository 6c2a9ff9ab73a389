import { type RawBuilder, sql } from "kysely";

/** A listing's window on an instant column, and the position its page starts below. */
export interface InstantWindow {
  createdFrom?: Date | undefined;
  createdTo?: Date | undefined;
  /** Strictly older than this position (a cursor's): the instant as the cursor writes it, then id. */
  before?: { at: string; id: string } | undefined;
}

/**
 * The conditions of a page read newest first on (`alias`.`instant`, `alias`.id): inside the window
 * [createdFrom, createdTo), and strictly below the cursor's position, so the index on those columns
 * reads from that position backwards.
 */
export function instantKeysetConditions(
  alias: string,
  window: InstantWindow,
  instant = "created_at",
): RawBuilder<unknown>[] {
  const at = sql.ref(`${alias}.${instant}`);
  const id = sql.ref(`${alias}.id`);
  const conditions: RawBuilder<unknown>[] = [];
  if (window.createdFrom) conditions.push(sql`${at} >= ${window.createdFrom}`);
  if (window.createdTo) conditions.push(sql`${at} < ${window.createdTo}`);
  if (window.before)
    conditions.push(sql`(${at}, ${id}) < (${window.before.at}::timestamptz, ${window.before.id}::uuid)`);
  return conditions;
}
