import { type RawBuilder, sql } from "kysely";
import type { Tx } from "../db/database.ts";
import { jsonbArray } from "../db/jsonb-array.ts";
import { assertBalanced, type EntryInput, netByAccount, onShards } from "./ledger.ts";
import type { Cents } from "./money.ts";

/**
 * Many entries written by one statement, for the paths that batch requests (transfers out): the
 * CTEs below go into the caller's statement with the rows it writes beside the money. The batch
 * posts to one shard of each sharded account, chosen at random as postEntry chooses. The accounts are locked in postEntry's order (cards'
 * and clients' by id, then the system accounts by id), each moves once by its net change, and an
 * account that may not go negative must cover it, or the statement refuses itself (EM001,
 * emisor_require) and writes nothing.
 */
export interface LedgerBatch {
  /** The CTEs: ledger_net, ledger_locked, ledger_moved, ledger_entries, ledger_postings. */
  ctes: RawBuilder<unknown>;
  /**
   * The items of the statement's target list that run them, in this order (a scalar subquery runs
   * where it first appears): the locks, the moves (refused unless every account moved), the rows.
   */
  steps: RawBuilder<unknown>;
}

export type BatchEntry = Required<Pick<EntryInput, "id">> & EntryInput;

/**
 * `chosen` names the shard of a sharded account the batch must post to (a batch of card holds
 * records the shard its holds sit on); the others are drawn at random.
 */
export function ledgerBatch(entries: BatchEntry[], chosen = new Map<string, string>()): LedgerBatch {
  // One shard per sharded account for the whole batch: the batch is one transaction, so spreading
  // its entries would only lock and update more rows.
  return batchOf(entries.map((entry) => ({ ...entry, postings: onShards(entry.postings, chosen) })));
}

/**
 * Many entries in one statement of its own, each on exactly the accounts it names, a shard named
 * as itself (as postEntryOnShards posts one): for a caller that decided a batch's movements one by
 * one, holds the rows of its own accounts already, and posts to the shards its holds sit on. The
 * rows are written before the accounts are locked: the system accounts' rows, which every other
 * movement waits for, are then held for their moves and the commit, not for hundreds of inserts.
 */
export async function postEntriesOnShards(tx: Tx, entries: BatchEntry[]): Promise<void> {
  if (entries.length === 0) return;
  const batch = batchOf(entries, { rowsFirst: true });
  await sql`with ${batch.ctes} select ${batch.steps}`.execute(tx);
}

/**
 * The accounts are reached by their primary key, one lookup each (a lateral subquery, an `= any`
 * condition): joined to the batch's list as a table, the planner may read the whole accounts
 * table instead, whose rows are updated so often that its pages are mostly dead row versions.
 */
function batchOf(placed: BatchEntry[], options: { rowsFirst?: boolean } = {}): LedgerBatch {
  for (const entry of placed) assertBalanced(entry.postings);
  const net = netByAccount(placed.flatMap((entry) => entry.postings)).filter(([, delta]) => delta !== 0n);
  const ctes = sql`
    ledger_net as (
      select * from unnest(${net.map(([id]) => id)}::uuid[], ${net.map(([, delta]) => String(delta))}::bigint[])
        with ordinality as n(id, delta, position)),
    ledger_locked as (
      select a.id from ledger_net n
      cross join lateral (select a.id from ledger_accounts a where a.id = n.id for update) a
      order by n.position),
    ledger_moved as (
      update ledger_accounts a set balance_cents = a.balance_cents + n.delta
      from ledger_net n
      where a.id = any(array(select id from ledger_net)) and a.id = n.id
        and (a.allow_negative or a.balance_cents + n.delta >= 0) returning a.id),
    ${entryRows(placed)}`;
  const moves = sql`
    (select count(*) from ledger_locked) as ledger_locked,
    emisor_require((select count(*) from ledger_moved) = ${net.length}, 'an account does not cover the batch')
      as ledger_moved`;
  const steps = options.rowsFirst
    ? sql`${rowsWritten} as ledger_rows, ${moves}`
    : sql`${moves}, ${rowsWritten} as ledger_rows`;
  return { ctes, steps };
}

/** The CTEs ledger_entries and ledger_postings: the rows of balanced entries, in their order. */
function entryRows(entries: BatchEntry[]): RawBuilder<unknown> {
  const postings = entries.flatMap((entry) => entry.postings.map((p) => ({ entryId: entry.id, ...p })));
  return sql`ledger_entries as (
      insert into journal_entries (id, kind, description, client_id, metadata)
      select * from unnest(${entries.map((e) => e.id)}::uuid[], ${entries.map((e) => e.kind)}::text[],
        ${entries.map((e) => e.description ?? null)}::text[], ${entries.map((e) => e.clientId ?? null)}::uuid[],
        ${jsonbArray(entries.map((e) => (e.metadata ? JSON.stringify(e.metadata) : null)))})
      returning id),
    ledger_postings as (
      insert into postings (entry_id, account_id, amount_cents)
      select * from unnest(${postings.map((p) => p.entryId)}::uuid[], ${postings.map((p) => p.accountId)}::uuid[],
        ${postings.map((p) => String(p.amountCents))}::bigint[])
      returning id)`;
}

/** How many rows of entries and postings the statement wrote. */
const rowsWritten = sql`(select count(*) from ledger_entries) + (select count(*) from ledger_postings)`;

/** An entry that moves an amount from one account (a payer's balance) to another (a card's). */
export interface PairedEntry {
  id: string;
  kind: string;
  description: string;
  clientId: string;
  metadata: Record<string, unknown>;
  fromId: string;
  toId: string;
  amountCents: Cents;
}

/**
 * Many paired entries in the caller's statement, for the payment batcher, which takes its locks in
 * its own order: every debited account (locked in id order), then its own rows (the cards), then
 * every credited account (locked in id order), so two batches on the same accounts cannot
 * deadlock. The caller places the CTE groups in its WITH list and the steps in its target list, in
 * that order (a scalar subquery runs where it first appears); a caller that locked the accounts
 * already leaves `lockDebited` and `lockCredited` out. Each debited account moves once, by its
 * total, and only if its balance is at least its guard (at least that total: a caller may demand
 * more, what earlier undecided batches may still take); each credited account moves once. Unless
 * every account moved, the statement refuses itself (EM001, emisor_require) and writes nothing, so
 * balances always equal their postings.
 */
export interface PairedBatch {
  ctes: {
    /** ledger_entries, ledger_postings: the rows, which contend for nothing. */
    rows: RawBuilder<unknown>;
    /** ledger_debited_locked, ledger_debit. */
    debit: RawBuilder<unknown>;
    /** ledger_credited_locked, ledger_credit. */
    credit: RawBuilder<unknown>;
  };
  steps: {
    /** How many rows of entries and postings were written (a number, to add to the caller's). */
    rows: RawBuilder<unknown>;
    lockDebited: RawBuilder<unknown>;
    debit: RawBuilder<unknown>;
    lockCredited: RawBuilder<unknown>;
    credit: RawBuilder<unknown>;
    /** Each debited account's balance after the debit: JSON `[{id, balance}]`, balances as text. */
    balances: RawBuilder<unknown>;
  };
}

export function pairedBatch(entries: PairedEntry[], guards = new Map<string, Cents>()): PairedBatch {
  const rows: BatchEntry[] = entries.map((e) => ({
    id: e.id,
    kind: e.kind,
    description: e.description,
    clientId: e.clientId,
    metadata: e.metadata,
    postings: [
      { accountId: e.fromId, amountCents: -e.amountCents },
      { accountId: e.toId, amountCents: e.amountCents },
    ],
  }));
  for (const entry of rows) assertBalanced(entry.postings);
  const debits = totals(entries, (e) => e.fromId);
  const credits = totals(entries, (e) => e.toId);
  const debitIds = [...debits.keys()];
  const creditIds = [...credits.keys()];
  const debit = sql`ledger_debited_locked as (
      select id from ledger_accounts where id = any(${debitIds}::uuid[]) order by id for update),
    ledger_debit as (
      update ledger_accounts a set balance_cents = a.balance_cents - v.amount
      from (select unnest(${debitIds}::uuid[]) as id, unnest(${debitIds.map((id) => String(debits.get(id)))}::bigint[]) as amount,
        unnest(${debitIds.map((id) => String(guards.get(id) ?? debits.get(id)))}::bigint[]) as guard) v
      where a.id = v.id and a.balance_cents >= v.guard returning a.id, a.balance_cents)`;
  const credit = sql`ledger_credited_locked as (
      select id from ledger_accounts where id = any(${creditIds}::uuid[]) order by id for update),
    ledger_credit as (
      update ledger_accounts a set balance_cents = a.balance_cents + v.amount
      from (select unnest(${creditIds}::uuid[]) as id, unnest(${creditIds.map((id) => String(credits.get(id)))}::bigint[]) as amount) v
      where a.id = v.id returning a.id)`;
  return {
    ctes: { rows: entryRows(rows), debit, credit },
    steps: {
      rows: rowsWritten,
      lockDebited: sql`(select count(*) from ledger_debited_locked)`,
      debit: sql`emisor_require((select count(*) from ledger_debit) = ${debitIds.length}, 'a debited account no longer covers the batch')`,
      lockCredited: sql`(select count(*) from ledger_credited_locked)`,
      credit: sql`emisor_require((select count(*) from ledger_credit) = ${creditIds.length}, 'a credited account does not exist')`,
      balances: sql`(select json_agg(json_build_object('id', id, 'balance', balance_cents::text)) from ledger_debit)`,
    },
  };
}

function totals(entries: PairedEntry[], accountOf: (e: PairedEntry) => string): Map<string, Cents> {
  const sums = new Map<string, Cents>();
  for (const e of entries) sums.set(accountOf(e), (sums.get(accountOf(e)) ?? 0n) + e.amountCents);
  return sums;
}
