import { type RawBuilder, sql } from "kysely";
import { assertBalanced, type EntryInput, netByAccount, onShards } from "./ledger.ts";

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

export function ledgerBatch(entries: BatchEntry[]): LedgerBatch {
  // One shard per sharded account for the whole batch: the batch is one transaction, so spreading
  // its entries would only lock and update more rows.
  const chosen = new Map<string, string>();
  const placed = entries.map((entry) => ({ ...entry, postings: onShards(entry.postings, chosen) }));
  for (const entry of placed) assertBalanced(entry.postings);
  const net = netByAccount(placed.flatMap((entry) => entry.postings)).filter(([, delta]) => delta !== 0n);
  const postings = placed.flatMap((entry) => entry.postings.map((p) => ({ entryId: entry.id, ...p })));
  const ctes = sql`
    ledger_net as (
      select * from unnest(${net.map(([id]) => id)}::uuid[], ${net.map(([, delta]) => String(delta))}::bigint[])
        with ordinality as n(id, delta, position)),
    ledger_locked as (
      select a.id from ledger_accounts a join ledger_net n on n.id = a.id order by n.position for update of a),
    ledger_moved as (
      update ledger_accounts a set balance_cents = a.balance_cents + n.delta
      from ledger_net n
      where a.id = n.id and (a.allow_negative or a.balance_cents + n.delta >= 0) returning a.id),
    ledger_entries as (
      insert into journal_entries (id, kind, description, client_id, metadata)
      select * from unnest(${placed.map((e) => e.id)}::uuid[], ${placed.map((e) => e.kind)}::text[],
        ${placed.map((e) => e.description ?? null)}::text[], ${placed.map((e) => e.clientId ?? null)}::uuid[],
        ${placed.map((e) => (e.metadata ? JSON.stringify(e.metadata) : null))}::jsonb[])
      returning id),
    ledger_postings as (
      insert into postings (entry_id, account_id, amount_cents)
      select * from unnest(${postings.map((p) => p.entryId)}::uuid[], ${postings.map((p) => p.accountId)}::uuid[],
        ${postings.map((p) => String(p.amountCents))}::bigint[])
      returning id)`;
  const steps = sql`
    (select count(*) from ledger_locked) as ledger_locked,
    emisor_require((select count(*) from ledger_moved) = ${net.length}, 'an account does not cover the batch')
      as ledger_moved,
    (select count(*) from ledger_entries) + (select count(*) from ledger_postings) as ledger_rows`;
  return { ctes, steps };
}
