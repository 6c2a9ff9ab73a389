import { sql } from "kysely";
import type { Db, Tx } from "../../db/database.ts";
import type { StoredResponse } from "../../idempotency/reply.ts";
import { type IdempotencyRecord, keyRecordsCte, retentionStart } from "../../idempotency/store.ts";
import { type PairedEntry, pairedBatch } from "../../ledger/batch.ts";
import { eventsWithDeliveries, type OutboxEvent } from "../events/repository.ts";

/**
 * SQL of the batched payment path. Under lock: one statement that takes the locks and reads what
 * the batch decides on, one that writes everything, in one transaction. At once: one statement
 * that is its own transaction, for a batch decided beforehand. All take arrays (unnest), so a batch
 * of one payment and a batch of 256 payments of many payers are the same statements with the same
 * plans.
 */
export interface StoredKey {
  api_key_id: string;
  key: string;
  request_hash: string;
  response_status: number;
  response_body: StoredResponse["body"];
}

export interface LockedBatch {
  /** Balance of each payer that has a ledger account. */
  balances: Map<string, bigint>;
  statuses: Map<string, string>;
  stored: StoredKey[];
  /** Keys of the batch whose rows expired (not purged yet): not stored, to be taken over. */
  expired: Array<{ api_key_id: string; key: string }>;
}

/**
 * Locks, in this order (uncorrelated subqueries run in target-list order, so every batch takes
 * them the same way): the payers' balance rows FOR UPDATE in id order, the cards FOR SHARE (a
 * block or a cancel waits for us), and the cards' balance rows FOR UPDATE in id order (two batches
 * paying the same cards cannot deadlock). The idempotency keys already stored are read in the
 * same statement, so from its snapshot: a key another process stored while this one waited for
 * the payer's lock is not among them. That race costs a retry, not a second payment: storing the
 * key again violates its primary key (23505), and the batcher runs the batch again, where the key
 * is seen and replayed (`#underLock`); a second round trip per batch would avoid the retry for a
 * race that takes a client sending one key to two processes at once. An expired key
 * (idempotency/store.ts) is not stored but listed, for `forgetExpiredKeys`. Balances travel as text:
 * JSON numbers are doubles.
 */
export async function lockBatch(
  tx: Tx,
  payerIds: string[],
  cardIds: string[],
  keys: { apiKeyIds: string[]; keys: string[] },
): Promise<LockedBatch> {
  const result = await sql<{
    balances: Array<{ id: string; balance: string }>;
    statuses: Array<{ id: string; status: string }>;
    locked: bigint;
    stored: Array<StoredKey & { live: boolean }>;
  }>`
    select
      (select coalesce(json_agg(json_build_object('id', p.id, 'balance', p.balance_cents::text)), '[]')
         from (select id, balance_cents from ledger_accounts where id = any(${payerIds}::uuid[]) order by id for update) p)
         as balances,
      (select coalesce(json_agg(json_build_object('id', c.id, 'status', c.status)), '[]')
         from (select id, status from cards where id = any(${cardIds}::uuid[]) for share) c) as statuses,
      (select count(*) from (select id from ledger_accounts where id = any(${cardIds}::uuid[]) order by id for update) l)
         as locked,
      (select coalesce(json_agg(json_build_object('api_key_id', k.api_key_id, 'key', k.key,
           'request_hash', k.request_hash, 'response_status', k.response_status, 'response_body', k.response_body,
           'live', k.created_at > ${retentionStart})), '[]')
         from idempotency_keys k where k.api_key_id = any(${keys.apiKeyIds}::uuid[]) and k.key = any(${keys.keys}::text[]))
         as stored`.execute(tx);
  const row = result.rows[0];
  const stored = row?.stored ?? [];
  return {
    balances: new Map((row?.balances ?? []).map((b) => [b.id, BigInt(b.balance)])),
    statuses: new Map((row?.statuses ?? []).map((s) => [s.id, s.status])),
    stored: stored.filter((k) => k.live).map(({ live: _, ...k }) => k),
    expired: stored.filter((k) => !k.live).map((k) => ({ api_key_id: k.api_key_id, key: k.key })),
  };
}

/**
 * Deletes the rows of expired keys a batch is about to store again, after `lockBatch` (the payer
 * locks are taken first, as in every batch). Rare: only a key reused after its 48 hours whose row
 * the purge has not reached yet.
 */
export async function forgetExpiredKeys(
  tx: Tx,
  keys: Array<{ api_key_id: string; key: string }>,
): Promise<void> {
  await sql`
    delete from idempotency_keys k
    using unnest(${keys.map((k) => k.api_key_id)}::uuid[], ${keys.map((k) => k.key)}::text[]) as v(api_key_id, key)
    where k.api_key_id = v.api_key_id and k.key = v.key and k.created_at <= ${retentionStart}`.execute(tx);
}

export interface AcceptedPayment {
  entryId: string;
  payerId: string;
  cardId: string;
  /** The card's client: its events' owner when not the payer (`card.payment.received`). */
  cardClientId: string;
  amountCents: bigint;
  description: string;
  metadata: Record<string, unknown>;
}

/**
 * Applies the accepted payments in one statement of the batch's transaction, after `lockBatch`
 * (which holds every lock the ledger's steps would take): each payer's one debit (still guarded: it
 * must cover the payer's total), each card's credit, the journal entries and their postings (all
 * written by the ledger, `pairedBatch`), the idempotency records of the requests that carried a key
 * (refused ones too), and the `card.payment` events with their webhook deliveries (the outbox).
 */
export async function applyPayments(
  tx: Tx,
  payments: AcceptedPayment[],
  records: IdempotencyRecord[],
  events: OutboxEvent[],
): Promise<void> {
  const ledger = pairedBatch(payments.map(ledgerEntry));
  await sql`
    with ${ledger.ctes.debit},
    ${ledger.ctes.credit},
    ${ledger.ctes.rows},
    ${keyRecordsCte(records, sql``)},
    ${eventsWithDeliveries(events)}
    select ${ledger.steps.debit} as debited, ${ledger.steps.credit} as credited`.execute(tx);
}

/** A batch decided before its locks are taken: every payment accepted, on the stated conditions. */
export interface BatchAtOnce {
  payments: AcceptedPayment[];
  /** Every request that carried a key, with its 200. */
  records: IdempotencyRecord[];
  events: OutboxEvent[];
  /**
   * The balance each payer must have when its row is locked: its total in this batch plus what
   * the batches sent before this one and still undecided may take (see the batcher).
   */
  guards: Map<string, bigint>;
  /** The status each card's answer states; the card must still have it. */
  statuses: Map<string, string>;
}

/**
 * The whole batch as ONE statement, its own transaction (autocommit): no BEGIN, no COMMIT, and no
 * reply to wait for while the payer rows are locked. The rows that contend for nothing (entries,
 * postings, events and deliveries) are written first; then, in the order `lockBatch` takes them,
 * the payer rows (locked in id order, then debited if they still hold their guard), the cards
 * (still in the stated status) and the cards' balance rows (locked in id order, then credited);
 * then the idempotency keys, which must all be new (an expired key whose row the purge has not
 * deleted yet counts as taken: the batch falls back to the locked form, which takes it over). The
 * target list is evaluated left to right and each scalar subquery runs where it first appears,
 * which is what orders these steps. Any check that fails raises EM001 (`emisor_require`, migration
 * 0008) and the statement writes nothing. Answers each payer's balance after its debit.
 */
export async function applyPaymentsAtOnce(db: Db, batch: BatchAtOnce): Promise<Map<string, bigint>> {
  const { payments, records, events, guards, statuses } = batch;
  const ledger = pairedBatch(payments.map(ledgerEntry), guards);
  const cardIds = [...new Set(payments.map((p) => p.cardId))];
  const result = await sql<{ balances: Array<{ id: string; balance: string }> }>`
    with ${ledger.ctes.rows},
    ${eventsWithDeliveries(events)},
    ${ledger.ctes.debit},
    payable as (
      select c.id from cards c
      join unnest(${cardIds}::uuid[], ${cardIds.map((id) => statuses.get(id) ?? "")}::text[]) as v(id, status)
        on c.id = v.id and c.status = v.status
      order by c.id for share of c),
    ${ledger.ctes.credit},
    ${keyRecordsCte(records, sql`on conflict do nothing`)}
    select
      ${ledger.steps.rows} + (select count(*) from outbox_events) + (select count(*) from outbox_deliveries) as written,
      ${ledger.steps.lockDebited} as locked,
      ${ledger.steps.debit} as covered,
      emisor_require((select count(*) from payable) = ${cardIds.length}, 'a card changed status') as payable,
      ${ledger.steps.lockCredited} as card_accounts,
      ${ledger.steps.credit} as credited,
      emisor_require((select count(*) from keys) = ${records.length}, 'an idempotency key is taken') as keyed,
      ${ledger.steps.balances} as balances`.execute(db);
  return new Map((result.rows[0]?.balances ?? []).map((b) => [b.id, BigInt(b.balance)]));
}

/** A payment as the ledger writes it: from the payer's balance to the card's. */
function ledgerEntry(p: AcceptedPayment): PairedEntry {
  return {
    id: p.entryId,
    kind: "CARD_PAYMENT",
    description: p.description,
    clientId: p.payerId,
    metadata: p.metadata,
    fromId: p.payerId,
    toId: p.cardId,
    amountCents: p.amountCents,
  };
}
