import { type RawBuilder, sql } from "kysely";
import type { Tx } from "../../db/database.ts";
import { type CountedWindow, countedWindows, type WindowKeys, windowKeysAt } from "../controls/windows.ts";

/**
 * What a card spent, as velocity limits count it: each authorization counts what it holds and
 * what was cleared of it (a declined one nothing), in the windows of the moment it was made. So a
 * hold counts when taken, a release gives it back, a clearing above the hold adds the difference,
 * and a force post counts as it posts; a return gives nothing back. An authorization that spent
 * anything counts once. Changes are kept per card in card_spending (migration 0027), written in
 * the transaction of the change, while the card's ledger row is locked.
 */
export interface Spending {
  keys: WindowKeys;
  cents: Record<CountedWindow | "LIFETIME", bigint>;
  count: Record<CountedWindow | "LIFETIME", number>;
}

/** A card_spending row as read. */
export interface SpendingRow {
  day_key: number;
  day_cents: bigint;
  day_count: number;
  week_key: number;
  week_cents: bigint;
  week_count: number;
  month_key: number;
  month_cents: bigint;
  month_count: number;
  year_key: number;
  year_cents: bigint;
  year_count: number;
  lifetime_cents: bigint;
  lifetime_count: number;
}

const column = { DAY: "day", WEEK: "week", MONTH: "month", YEAR: "year" } as const;

/** What a card spent in each window that contains `keys`' moment (an older window counts nothing). */
export function spendingAt(row: SpendingRow | null | undefined, keys: WindowKeys): Spending {
  const spending: Spending = {
    keys,
    cents: { DAY: 0n, WEEK: 0n, MONTH: 0n, YEAR: 0n, LIFETIME: BigInt(row?.lifetime_cents ?? 0n) },
    count: { DAY: 0, WEEK: 0, MONTH: 0, YEAR: 0, LIFETIME: Number(row?.lifetime_count ?? 0) },
  };
  if (!row) return spending;
  for (const window of countedWindows) {
    const name = column[window];
    if (Number(row[`${name}_key`]) !== keys[window]) continue;
    spending.cents[window] = BigInt(row[`${name}_cents`]);
    spending.count[window] = Number(row[`${name}_count`]);
  }
  return spending;
}

/** What an authorization spends now: its hold and what was cleared, once; nothing if declined. */
export function spendOf(row: { status: string; held_cents: bigint; cleared_cents: bigint }): bigint {
  return row.status === "DECLINED" ? 0n : row.held_cents + row.cleared_cents;
}

/** A card's change of spending, in the windows that contain now. */
export interface SpendingDelta {
  cardId: string;
  cents: Record<CountedWindow | "LIFETIME", bigint>;
  count: Record<CountedWindow | "LIFETIME", number>;
}

type SpendRow = {
  card_id: string;
  created_at: Date;
  status: string;
  held_cents: bigint;
  cleared_cents: bigint;
};

/**
 * Each card's change of spending when authorizations change from `before` (absent for a new one)
 * to `after`: a change counts in the windows of the authorization's own moment that still contain
 * `now`, and in its card's lifetime.
 */
export function spendingDeltas(
  changes: Array<{ before?: SpendRow | undefined; after: SpendRow }>,
  now: WindowKeys,
): SpendingDelta[] {
  const byCard = new Map<string, SpendingDelta>();
  for (const { before, after } of changes) {
    const was = before ? spendOf(before) : 0n;
    const is = spendOf(after);
    const cents = is - was;
    const count = (is > 0n ? 1 : 0) - (was > 0n ? 1 : 0);
    if (cents === 0n && count === 0) continue;
    let delta = byCard.get(after.card_id);
    if (!delta) {
      delta = { cardId: after.card_id, cents: zeroCents(), count: zeroCounts() };
      byCard.set(after.card_id, delta);
    }
    const made = windowKeysAt(after.created_at);
    for (const window of countedWindows) {
      if (made[window] !== now[window]) continue;
      delta.cents[window] += cents;
      delta.count[window] += count;
    }
    delta.cents.LIFETIME += cents;
    delta.count.LIFETIME += count;
  }
  return [...byCard.values()];
}

export function zeroCents(): Record<CountedWindow | "LIFETIME", bigint> {
  return { DAY: 0n, WEEK: 0n, MONTH: 0n, YEAR: 0n, LIFETIME: 0n };
}

export function zeroCounts(): Record<CountedWindow | "LIFETIME", number> {
  return { DAY: 0, WEEK: 0, MONTH: 0, YEAR: 0, LIFETIME: 0 };
}

/** A copy of a card's spending, moved on to the windows of `now` (a window gone by counts nothing). */
export function spendingCopy(spending: Spending, now: WindowKeys): Spending {
  const copy: Spending = { keys: now, cents: { ...spending.cents }, count: { ...spending.count } };
  for (const window of countedWindows) {
    if (spending.keys[window] === now[window]) continue;
    copy.cents[window] = 0n;
    copy.count[window] = 0;
  }
  return copy;
}

/** Adds an approval to a card's spending as a batch decides (the card's running state). */
export function addSpend(spending: Spending, cents: bigint): void {
  if (cents <= 0n) return;
  for (const window of [...countedWindows, "LIFETIME"] as const) {
    spending.cents[window] += cents;
    spending.count[window] += 1;
  }
}

/** The SQL of each counted window, and the rows of `deltas` with what each card was seen at. */
function spendingParts(deltas: SpendingDelta[], now: WindowKeys, expected: ReadonlyMap<string, Spending>) {
  const list = (pick: (d: SpendingDelta) => bigint | number) => deltas.map((d) => String(pick(d)));
  const seen = (pick: (s: Spending) => bigint | number) =>
    deltas.map((d) => {
      const spending = expected.get(d.cardId);
      return spending ? String(pick(spending)) : null;
    });
  const parts = countedWindows.map((window) => {
    const name = column[window];
    const key = now[window];
    const current = (what: string) =>
      sql`(case when s.${sql.raw(`${name}_key`)} = ${key} then s.${sql.raw(`${name}_${what}`)} else 0 end)`;
    return {
      values: sql`${key}, v.${sql.raw(`${name}_cents`)}, v.${sql.raw(`${name}_count`)}`,
      set: sql`${sql.raw(`${name}_key`)} = ${key},
        ${sql.raw(`${name}_cents`)} = ${current("cents")} + v.${sql.raw(`${name}_cents`)},
        ${sql.raw(`${name}_count`)} = ${current("count")} + v.${sql.raw(`${name}_count`)}`,
      check: sql`${current("cents")} = v.${sql.raw(`seen_${name}_cents`)}
        and ${current("count")} = v.${sql.raw(`seen_${name}_count`)}`,
      zero: sql`v.${sql.raw(`seen_${name}_cents`)} = 0 and v.${sql.raw(`seen_${name}_count`)} = 0`,
    };
  });
  const source = sql`unnest(${deltas.map((d) => d.cardId)}::uuid[],
        ${list((d) => d.cents.DAY)}::bigint[], ${list((d) => d.count.DAY)}::integer[],
        ${list((d) => d.cents.WEEK)}::bigint[], ${list((d) => d.count.WEEK)}::integer[],
        ${list((d) => d.cents.MONTH)}::bigint[], ${list((d) => d.count.MONTH)}::integer[],
        ${list((d) => d.cents.YEAR)}::bigint[], ${list((d) => d.count.YEAR)}::integer[],
        ${list((d) => d.cents.LIFETIME)}::bigint[], ${list((d) => d.count.LIFETIME)}::integer[],
        ${seen((x) => x.cents.DAY)}::bigint[], ${seen((x) => x.count.DAY)}::integer[],
        ${seen((x) => x.cents.WEEK)}::bigint[], ${seen((x) => x.count.WEEK)}::integer[],
        ${seen((x) => x.cents.MONTH)}::bigint[], ${seen((x) => x.count.MONTH)}::integer[],
        ${seen((x) => x.cents.YEAR)}::bigint[], ${seen((x) => x.count.YEAR)}::integer[],
        ${seen((x) => x.cents.LIFETIME)}::bigint[], ${seen((x) => x.count.LIFETIME)}::integer[])
      as v(card_id, day_cents, day_count, week_cents, week_count, month_cents, month_count,
        year_cents, year_count, lifetime_cents, lifetime_count,
        seen_day_cents, seen_day_count, seen_week_cents, seen_week_count, seen_month_cents, seen_month_count,
        seen_year_cents, seen_year_count, seen_lifetime_cents, seen_lifetime_count)`;
  return { parts, source };
}

/**
 * The CTEs `card_spending_updated` and `card_spending_inserted` of a statement that changes cards'
 * spending by `deltas` (a window whose key is older than `now` starts again from zero), and the
 * target-list item that requires every card to have moved. A card named in `expected` moves only
 * if its spending now is exactly what the caller decided on: the update's condition is checked on
 * the row as locked, so two statements never both pass one limit. A row made meanwhile by another
 * statement is a conflict the insert skips. Either way the statement refuses itself (EM001).
 */
export function spendingMoves(
  deltas: SpendingDelta[],
  now: WindowKeys,
  expected: ReadonlyMap<string, Spending> = new Map(),
): { ctes: RawBuilder<unknown>; step: RawBuilder<unknown> } {
  const { parts, source } = spendingParts(deltas, now, expected);
  const ctes = sql`card_spending_updated as (
      update card_spending s set ${sql.join(
        parts.map((p) => p.set),
        sql`, `,
      )},
        lifetime_cents = s.lifetime_cents + v.lifetime_cents,
        lifetime_count = s.lifetime_count + v.lifetime_count
      from ${source}
      where s.card_id = any(${deltas.map((d) => d.cardId)}::uuid[]) and s.card_id = v.card_id
        and (v.seen_lifetime_count is null or (${sql.join(
          parts.map((p) => p.check),
          sql` and `,
        )}
        and s.lifetime_cents = v.seen_lifetime_cents and s.lifetime_count = v.seen_lifetime_count))
      returning s.card_id),
    card_spending_inserted as (
      insert into card_spending (card_id, day_key, day_cents, day_count, week_key, week_cents, week_count,
        month_key, month_cents, month_count, year_key, year_cents, year_count, lifetime_cents, lifetime_count)
      select v.card_id, ${sql.join(
        parts.map((p) => p.values),
        sql`, `,
      )}, v.lifetime_cents, v.lifetime_count
      from ${source}
      where not exists (select 1 from card_spending s where s.card_id = v.card_id)
        and (v.seen_lifetime_count is null or (${sql.join(
          parts.map((p) => p.zero),
          sql` and `,
        )} and v.seen_lifetime_cents = 0 and v.seen_lifetime_count = 0))
      on conflict (card_id) do nothing
      returning card_id)`;
  const step = sql`emisor_require((select count(*) from card_spending_updated)
      + (select count(*) from card_spending_inserted) = ${deltas.length}, 'a card spent meanwhile') as spending`;
  return { ctes, step };
}

/** Writes cards' changes of spending in the caller's transaction (no expectations). */
export async function moveSpending(tx: Tx, deltas: SpendingDelta[], now: WindowKeys): Promise<void> {
  if (deltas.length === 0) return;
  const moves = spendingMoves(deltas, now);
  await sql`with ${moves.ctes} select ${moves.step}`.execute(tx);
}

/** A card's spending row, read in the caller's transaction (the card's ledger row locked first). */
export async function readSpending(tx: Tx, cardId: string): Promise<SpendingRow | undefined> {
  const result = await sql<SpendingRow>`select * from card_spending where card_id = ${cardId}::uuid`.execute(
    tx,
  );
  return result.rows[0];
}
