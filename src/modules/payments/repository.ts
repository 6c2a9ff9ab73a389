import { sql } from "kysely";
import type { Tx } from "../../db/database.ts";
import type { Envelope } from "../../http/envelope.ts";
import { eventsWithDeliveries, type OutboxEvent } from "../webhooks/repository.ts";

/**
 * SQL of the batched payment path: one statement that takes the locks and reads what the batch
 * decides on, one that writes everything. Both take arrays (unnest), so a batch of one payment and
 * a batch of 256 payments of many payers are the same two statements with the same plans.
 */
export interface StoredKey {
  api_key_id: string;
  key: string;
  request_hash: string;
  response_status: number;
  response_body: Envelope;
}

export interface LockedBatch {
  /** Balance of each payer that has a ledger account. */
  balances: Map<string, bigint>;
  statuses: Map<string, string>;
  stored: StoredKey[];
}

/**
 * Locks, in this order (uncorrelated subqueries run in target-list order, so every batch takes
 * them the same way): the payers' balance rows FOR UPDATE in id order, the cards FOR SHARE (a
 * block or a cancel waits for us), and the cards' balance rows FOR UPDATE in id order (two batches
 * paying the same cards cannot deadlock). Under the payer locks, the idempotency keys already
 * stored are final. Balances travel as text: JSON numbers are doubles.
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
    stored: StoredKey[];
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
           'request_hash', k.request_hash, 'response_status', k.response_status, 'response_body', k.response_body)), '[]')
         from idempotency_keys k where k.api_key_id = any(${keys.apiKeyIds}::uuid[]) and k.key = any(${keys.keys}::text[]))
         as stored`.execute(tx);
  const row = result.rows[0];
  return {
    balances: new Map((row?.balances ?? []).map((b) => [b.id, BigInt(b.balance)])),
    statuses: new Map((row?.statuses ?? []).map((s) => [s.id, s.status])),
    stored: row?.stored ?? [],
  };
}

export interface AcceptedPayment {
  entryId: string;
  payerId: string;
  cardId: string;
  amountCents: bigint;
  description: string;
  metadata: Record<string, unknown>;
}

export interface IdempotencyRecord {
  apiKeyId: string;
  key: string;
  requestHash: string;
  /** 200 for a payment made, the refusal's status for one refused (a refusal is final too). */
  status: number;
  body: Envelope;
}

/**
 * Applies the accepted payments in one statement: each payer's one debit (still guarded: it must
 * cover the payer's total), each card's credit, the journal entries, their postings, the
 * idempotency records of the requests that carried a key (refused ones too), and the `card.payment` events with their
 * webhook deliveries (the outbox). Answers how many rows each part wrote.
 */
export async function applyPayments(
  tx: Tx,
  payments: AcceptedPayment[],
  records: IdempotencyRecord[],
  events: OutboxEvent[],
): Promise<{ debited: number; payers: number; credited: number; cards: number }> {
  const perPayer = sumBy(payments, (p) => p.payerId);
  const perCard = sumBy(payments, (p) => p.cardId);
  const result = await sql<{ debited: bigint; credited: bigint }>`
    with debit as (
      update ledger_accounts a set balance_cents = a.balance_cents - v.amount
      from (select unnest(${[...perPayer.keys()]}::uuid[]) as id, unnest(${[...perPayer.values()].map(String)}::bigint[]) as amount) v
      where a.id = v.id and a.balance_cents >= v.amount returning a.id),
    credit as (
      update ledger_accounts a set balance_cents = a.balance_cents + v.amount
      from (select unnest(${[...perCard.keys()]}::uuid[]) as id, unnest(${[...perCard.values()].map(String)}::bigint[]) as amount) v
      where a.id = v.id returning a.id),
    entries as (
      insert into journal_entries (id, kind, description, client_id, metadata)
      select id, 'CARD_PAYMENT', description, client_id, metadata
      from unnest(${payments.map((p) => p.entryId)}::uuid[], ${payments.map((p) => p.description)}::text[],
        ${payments.map((p) => p.payerId)}::uuid[], ${payments.map((p) => JSON.stringify(p.metadata))}::jsonb[])
        as t(id, description, client_id, metadata)
      returning id),
    postings as (
      insert into postings (entry_id, account_id, amount_cents)
      select entry_id, account_id, amount from unnest(
        ${payments.flatMap((p) => [p.entryId, p.entryId])}::uuid[],
        ${payments.flatMap((p) => [p.payerId, p.cardId])}::uuid[],
        ${payments.flatMap((p) => [String(-p.amountCents), String(p.amountCents)])}::bigint[]
      ) as t(entry_id, account_id, amount)
      returning id),
    keys as (
      insert into idempotency_keys (api_key_id, key, request_hash, response_status, response_body)
      select api_key_id, key, request_hash, status, body from unnest(
        ${records.map((r) => r.apiKeyId)}::uuid[], ${records.map((r) => r.key)}::text[],
        ${records.map((r) => r.requestHash)}::text[], ${records.map((r) => r.status)}::int[],
        ${records.map((r) => JSON.stringify(r.body))}::jsonb[]
      ) as t(api_key_id, key, request_hash, status, body)
      returning key),
    ${eventsWithDeliveries(events)}
    select (select count(*) from debit) as debited, (select count(*) from credit) as credited`.execute(tx);
  const row = result.rows[0];
  return {
    debited: Number(row?.debited ?? 0),
    payers: perPayer.size,
    credited: Number(row?.credited ?? 0),
    cards: perCard.size,
  };
}

function sumBy(payments: AcceptedPayment[], keyOf: (p: AcceptedPayment) => string): Map<string, bigint> {
  const sums = new Map<string, bigint>();
  for (const p of payments) sums.set(keyOf(p), (sums.get(keyOf(p)) ?? 0n) + p.amountCents);
  return sums;
}
