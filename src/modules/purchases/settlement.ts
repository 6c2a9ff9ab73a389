import { sql } from "kysely";
import type { Queryable } from "../../db/database.ts";

/** The time zone whose calendar day a settlement covers: the network settles by Mexico City's day. */
export const settlementTimeZone = "America/Mexico_City";

export interface Tally {
  count: number;
  amountCents: bigint;
}

/**
 * What the issuer owes the card network for one Mexico City day: the clearings posted that day
 * (force posts included) less the returns, plus the return reversals (each takes a return back).
 * Negative when returns outran purchases: the network owes the issuer.
 */
export interface Settlement {
  date: string;
  from: Date;
  until: Date;
  clearings: Tally;
  returns: Tally;
  returnReversals: Tally;
  owedCents: bigint;
}

/**
 * The settlement of `date` (YYYY-MM-DD, a real day), from the amounts the messages stored: every
 * row of these types is a posted message (a refused one leaves no row). The day's bounds are
 * Mexico City's midnights, as PostgreSQL's time zone data places them (-6 h; -5 h in the summers
 * before 2023), and the partial index on created_at covers exactly these types.
 */
export async function dailySettlement(db: Queryable, date: string): Promise<Settlement> {
  const result = await sql<{ type: string; count: number; total: bigint; from: Date; until: Date }>`
    with day as (
      select ${date}::date::timestamp at time zone ${settlementTimeZone} as "from",
        (${date}::date + 1)::timestamp at time zone ${settlementTimeZone} as until)
    select day."from", day.until, m.type, count(m.message_id)::int as count,
      coalesce(sum(m.amount_cents), 0)::bigint as total
    from day left join card_network_messages m
      on m.type in ('CLEARING', 'RETURN', 'RETURN_REVERSAL')
      and m.created_at >= day."from" and m.created_at < day.until
    group by day."from", day.until, m.type`.execute(db);
  const tally = (type: string): Tally => {
    const row = result.rows.find((r) => r.type === type);
    return { count: row?.count ?? 0, amountCents: row?.total ?? 0n };
  };
  const first = result.rows[0];
  if (!first) throw new Error("the settlement query answered no row");
  const clearings = tally("CLEARING");
  const returns = tally("RETURN");
  const returnReversals = tally("RETURN_REVERSAL");
  return {
    date,
    from: first.from,
    until: first.until,
    clearings,
    returns,
    returnReversals,
    owedCents: clearings.amountCents - returns.amountCents + returnReversals.amountCents,
  };
}
