import assert from "node:assert/strict";
import type { Postgres } from "./pg.ts";

/**
 * The books after a money scenario, checked incrementally so a large ledger does not make the
 * check cost more than the scenario: all balances sum to zero, no protected balance is negative,
 * every entry written since the watermark balances, every account it touched equals the sum of all
 * its postings, and each payer's balance moved by exactly the payments the server made. Those are
 * then compared with the 2xx answers the load generator saw: at most one request per connection
 * per run may have been completed by the server after the generator stopped listening.
 */
export async function postingsWatermark(pgs: Postgres, database: string): Promise<string> {
  return settle(pgs, database);
}

const maxPosting = async (pgs: Postgres, database: string) =>
  (await pgs.sql<{ id: string | null }>(database, "select max(id)::text as id from postings"))[0]?.id ?? "0";

/**
 * Waits until the server has finished what the load generator left in flight (no posting written
 * for 300 ms): a batch committing between reading the watermark and reading a balance would
 * otherwise count a payment on one side only. Answers the watermark.
 */
async function settle(pgs: Postgres, database: string): Promise<string> {
  let previous = await maxPosting(pgs, database);
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 300));
    const current = await maxPosting(pgs, database);
    if (current === previous) return current;
    previous = current;
  }
}

export async function balancesOf(
  pgs: Postgres,
  database: string,
  ids: string[],
): Promise<Map<string, bigint>> {
  const rows = await pgs.sql<{ id: string; b: string }>(
    database,
    "select id, balance_cents::text as b from ledger_accounts where id = any($1)",
    [ids],
  );
  return new Map(rows.map((r) => [r.id, BigInt(r.b)]));
}

export async function checkBooks(
  pgs: Postgres,
  database: string,
  since: string,
  start: Map<string, bigint>,
  seen: { ok2xx: number; connections: number; runs: number; amountCents: bigint } | undefined,
): Promise<void> {
  await settle(pgs, database);
  const [total] = await pgs.sql<{ s: string }>(
    database,
    "select coalesce(sum(balance_cents), 0)::text as s from ledger_accounts",
  );
  assert.equal(total?.s, "0", "the balances do not sum to zero");
  const negative = await pgs.sql(
    database,
    "select id from ledger_accounts where not allow_negative and balance_cents < 0 limit 1",
  );
  assert.equal(negative.length, 0, "a protected balance is negative");
  const unbalanced = await pgs.sql(
    database,
    "select entry_id from postings where id > $1 group by entry_id having sum(amount_cents) <> 0 limit 1",
    [since],
  );
  assert.equal(unbalanced.length, 0, "an entry does not balance");
  const drift = await pgs.sql(
    database,
    `with touched as (select distinct account_id from postings where id > $1)
     select a.id from ledger_accounts a join touched t on t.account_id = a.id
     where a.balance_cents <> (select coalesce(sum(p.amount_cents), 0) from postings p where p.account_id = a.id) limit 1`,
    [since],
  );
  assert.equal(drift.length, 0, "an account's balance differs from the sum of its postings");
  if (start.size === 0) return;
  const actual = await balancesOf(pgs, database, [...start.keys()]);
  const debits = await pgs.sql<{ account_id: string; n: string; cents: string }>(
    database,
    "select account_id, count(*)::text as n, (-sum(amount_cents))::text as cents from postings where id > $1 and account_id = any($2) and amount_cents < 0 group by account_id",
    [since, [...start.keys()]],
  );
  const paid = new Map(debits.map((d) => [d.account_id, { n: Number(d.n), cents: BigInt(d.cents) }]));
  let made = 0;
  for (const [id, before] of start) {
    const payer = paid.get(id) ?? { n: 0, cents: 0n };
    assert.equal(
      actual.get(id),
      before - payer.cents,
      `payer ${id}: balance differs from start - its payments`,
    );
    made += payer.n;
  }
  if (!seen) return;
  const cents = [...paid.values()].reduce((a, p) => a + p.cents, 0n);
  assert.equal(BigInt(made) * seen.amountCents, cents, "a payment of another amount");
  assert.ok(made >= seen.ok2xx, `the server made ${made} payments but answered ${seen.ok2xx} with 2xx`);
  assert.ok(
    made - seen.ok2xx <= seen.connections * seen.runs,
    `${made - seen.ok2xx} payments made without a 2xx seen`,
  );
}
