import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import type { Queryable, Tx } from "../db/database.ts";
import type { LedgerAccountKind } from "../db/schema.ts";
import { AppError, errors } from "../errors.ts";
import { postingShardOf, shardsOf, systemAccountIds } from "./accounts.ts";
import { timeOrderedUuid } from "./ids.ts";
import type { Cents } from "./money.ts";

/**
 * The double-entry ledger. It imports no module: services call it inside their own transaction,
 * so a money movement commits or rolls back together with the change it belongs to.
 */
export interface Posting {
  accountId: string;
  amountCents: Cents;
}

export interface EntryInput {
  id?: string;
  kind: string;
  description?: string | null;
  clientId?: string | null;
  reversesId?: string | null;
  metadata?: Record<string, unknown> | null;
  postings: Posting[];
}

/** An account would go below zero; `accountId` says which. Services map it to their own code. */
export class InsufficientFundsError extends AppError {
  readonly accountId: string;
  constructor(accountId: string) {
    super(errors.insufficientFunds);
    this.accountId = accountId;
  }
}

export async function createAccount(
  tx: Queryable,
  account: { id?: string; kind: Exclude<LedgerAccountKind, "SYSTEM">; clientId: string },
): Promise<string> {
  const id = account.id ?? randomUUID();
  await tx
    .insertInto("ledger_accounts")
    .values({ id, kind: account.kind, client_id: account.clientId, allow_negative: false })
    .execute();
  return id;
}

/**
 * Applies the postings to their balances (in account-id order, so concurrent entries lock rows
 * in the same order and cannot deadlock), then writes the entry and its postings. A balance
 * that may not go negative is protected twice: by the conditional update here, which turns it
 * into InsufficientFundsError, and by the table's CHECK constraint.
 */
export async function postEntry(tx: Tx, input: EntryInput): Promise<string> {
  return writeEntry(tx, { ...input, postings: onShards(input.postings) });
}

/**
 * Posts on exactly the accounts named, a shard named as itself: for movements that must return to
 * the shard they came from (a card hold is released from, and cleared out of, the shard it was
 * taken on). A sharded account named by its own id is its shard 0.
 */
export async function postEntryOnShards(tx: Tx, input: EntryInput): Promise<string> {
  return writeEntry(tx, input);
}

/**
 * The postings with each sharded system account replaced by one of its shards, at random; the
 * shards already in `chosen` are kept (a batch posts to one shard per account).
 */
export function onShards(postings: Posting[], chosen = new Map<string, string>()): Posting[] {
  return postings.map((posting) => {
    let shard = chosen.get(posting.accountId);
    if (shard === undefined) {
      shard = postingShardOf(posting.accountId);
      chosen.set(posting.accountId, shard);
    }
    return shard === posting.accountId ? posting : { ...posting, accountId: shard };
  });
}

/**
 * Writes an entry on exactly the accounts its postings name, in one statement: the accounts are
 * locked in netByAccount's order, and when one that may not go negative would, nothing is written
 * and InsufficientFundsError names it. Otherwise every balance moves, and the entry and its
 * postings are inserted.
 */
async function writeEntry(tx: Tx, input: EntryInput): Promise<string> {
  assertBalanced(input.postings);
  const id = input.id ?? timeOrderedUuid();
  const deltas = netByAccount(input.postings).filter(([, delta]) => delta !== 0n);
  const result = await sql<{ short: string | null; found: number }>`
    with deltas as (
      select * from unnest(${deltas.map(([account]) => account)}::uuid[], ${deltas.map(([, delta]) => delta)}::bigint[])
        with ordinality as d(account_id, delta, position)
    ),
    locked as (
      select a.id, a.balance_cents, a.allow_negative, d.delta from ledger_accounts a
      join deltas d on d.account_id = a.id order by d.position for update of a
    ),
    short as (select id from locked where not allow_negative and balance_cents + delta < 0 limit 1),
    applied as (
      update ledger_accounts a set balance_cents = a.balance_cents + l.delta
      from locked l where a.id = l.id and not exists (select 1 from short)
      returning a.id
    ),
    entry as (
      insert into journal_entries (id, kind, description, client_id, reverses_id, metadata)
      select ${id}::uuid, ${input.kind}, ${input.description ?? null}, ${input.clientId ?? null}::uuid,
        ${input.reversesId ?? null}::uuid, ${input.metadata ? JSON.stringify(input.metadata) : null}::jsonb
      where not exists (select 1 from short)
      returning id
    ),
    posted as (
      insert into postings (entry_id, account_id, amount_cents)
      select e.id, p.account_id, p.amount_cents from entry e,
        unnest(${input.postings.map((p) => p.accountId)}::uuid[], ${input.postings.map((p) => p.amountCents)}::bigint[])
          with ordinality as p(account_id, amount_cents, position)
      order by p.position
      returning 1
    )
    select (select id from short)::text as short, (select count(*) from locked)::int as found,
      (select count(*) from applied)::int as applied, (select count(*) from posted)::int as posted`.execute(
    tx,
  );
  const row = result.rows[0];
  assert.ok(row && row.found === deltas.length, "a posting names a ledger account that does not exist");
  if (row.short !== null) throw new InsufficientFundsError(row.short);
  return id;
}

/** The entry was reversed already; a second reversal would move the money twice. */
export class AlreadyReversedError extends Error {
  constructor(entryId: string) {
    super(`journal entry ${entryId} is already reversed`);
  }
}

/**
 * Posts the mirror image of an entry. An entry can be reversed once: checked here, and by a
 * unique index on reverses_id for two reversals racing. Reversing may fail with
 * InsufficientFundsError if the money was spent since.
 */
export async function reverseEntry(
  tx: Tx,
  entryId: string,
  options: {
    kind: string;
    description?: string;
    clientId?: string | null;
    metadata?: Record<string, unknown>;
  },
): Promise<string> {
  const reversed = await tx
    .selectFrom("journal_entries")
    .select("id")
    .where("reverses_id", "=", entryId)
    .executeTakeFirst();
  if (reversed) throw new AlreadyReversedError(entryId);
  const postings = await tx
    .selectFrom("postings")
    .select(["account_id", "amount_cents"])
    .where("entry_id", "=", entryId)
    .orderBy("id")
    .execute();
  assert.ok(postings.length > 0, `entry ${entryId} has no postings to reverse`);
  try {
    // On the very accounts (and shards) the entry used: a shard credited by it is the one debited.
    return await writeEntry(tx, {
      kind: options.kind,
      description: options.description ?? null,
      clientId: options.clientId ?? null,
      reversesId: entryId,
      metadata: options.metadata ?? null,
      postings: postings.map((p) => ({ accountId: p.account_id, amountCents: -p.amount_cents })),
    });
  } catch (error) {
    if ((error as { constraint?: string }).constraint === "journal_entries_reverses_id_key") {
      throw new AlreadyReversedError(entryId);
    }
    throw error;
  }
}

/**
 * An account's balance (a sharded system account's: the sum of its shards); with `lock`, its row
 * is locked until the transaction ends.
 */
export async function balanceOf(
  db: Queryable,
  accountId: string,
  options: { lock?: boolean } = {},
): Promise<Cents> {
  const shards = shardsOf(accountId);
  if (shards.length > 1) {
    assert.ok(!options.lock, "a sharded system account is never locked whole");
    const sum = await sql<{ balance: bigint }>`
      select coalesce(sum(balance_cents), 0)::bigint as balance from ledger_accounts
      where id = any(${shards}::uuid[])`.execute(db);
    return sum.rows[0]?.balance ?? 0n;
  }
  let query = db.selectFrom("ledger_accounts").select("balance_cents").where("id", "=", accountId);
  if (options.lock) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  assert.ok(row, `ledger account ${accountId} does not exist`);
  return row.balance_cents;
}

export function assertBalanced(postings: Posting[]): void {
  assert.ok(postings.length >= 2, "an entry needs at least two postings");
  let sum = 0n;
  for (const posting of postings) {
    assert.ok(posting.amountCents !== 0n, "a posting of zero is meaningless");
    sum += posting.amountCents;
  }
  assert.equal(sum, 0n, "postings of an entry must sum to zero");
}

/**
 * The net change of each account, in the order their rows are locked: clients' and cards' accounts
 * by id, then the system accounts (shared by every client: airtime payable, SPEI out, fees) by id.
 * Callers lock a client's or card's rows before posting (a payer's balance, a card), so a system
 * account taken first would be held while waiting for those and close a cycle: an airtime top-up
 * from a main balance waiting for it, an unload holding it and waiting for the card, a top-up paid
 * by that card holding the card and waiting for the system account. Last, it is also held for the
 * shortest time, which the hottest rows of all want.
 */
export function netByAccount(postings: Posting[]): Array<[string, Cents]> {
  const net = new Map<string, Cents>();
  for (const p of postings) net.set(p.accountId, (net.get(p.accountId) ?? 0n) + p.amountCents);
  const rank = (id: string) => (systemAccountIds.has(id) ? 1 : 0);
  return [...net.entries()].sort(([a], [b]) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
}

/** The ledger's invariants, for tests, benchmarks and the chaos run. Empty when all hold. */
export async function checkInvariants(db: Queryable): Promise<string[]> {
  const problems: string[] = [];
  const total = await sql<{ total: string | null }>`
    select sum(balance_cents)::text as total from ledger_accounts`.execute(db);
  if ((total.rows[0]?.total ?? "0") !== "0") problems.push(`balances sum to ${total.rows[0]?.total}, not 0`);
  const unbalanced = await sql<{ entry_id: string }>`
    select entry_id from postings group by entry_id having sum(amount_cents) <> 0 limit 10`.execute(db);
  for (const row of unbalanced.rows) problems.push(`entry ${row.entry_id} does not balance`);
  const drift = await sql<{ id: string }>`
    select a.id from ledger_accounts a
    left join (select account_id, sum(amount_cents) as s from postings group by account_id) p on p.account_id = a.id
    where a.balance_cents <> coalesce(p.s, 0) limit 10`.execute(db);
  for (const row of drift.rows)
    problems.push(`account ${row.id} balance differs from the sum of its postings`);
  const negative = await sql<{ id: string }>`
    select id from ledger_accounts where not allow_negative and balance_cents < 0 limit 10`.execute(db);
  for (const row of negative.rows) problems.push(`account ${row.id} is negative`);
  return problems;
}
