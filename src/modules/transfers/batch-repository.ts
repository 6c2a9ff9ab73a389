import { sql } from "kysely";
import type { Db } from "../../db/database.ts";
import type { RailJob } from "../../db/rail-outbox.ts";
import { type IdempotencyRecord, keyRecordsCte } from "../../idempotency/store.ts";
import { type BatchEntry, ledgerBatch } from "../../ledger/batch.ts";
import { eventsWithDeliveries, type OutboxEvent } from "../events/repository.ts";
import type { SpeiOrderRow } from "./repository.ts";

/** One transfer out of a batch, decided before the statement: what it writes. */
export interface BatchedTransfer {
  /** The new order (PENDIENTE): what the statement inserts, and what its hand-over to the rail sends. */
  row: SpeiOrderRow;
  entry: BatchEntry;
  event: OutboxEvent;
  record: IdempotencyRecord | undefined;
  /** The card's state the transfer was decided on: the card must still have it. */
  card: { id: string; pinHash: string; commissionCents: bigint };
}

const orderColumns = [
  "id",
  "client_id",
  "payer_account_id",
  "card_id",
  "tracking_key",
  "operation_date",
  "amount_cents",
  "commission_cents",
  "iva_cents",
  "beneficiary_account",
  "beneficiary_card_sealed",
  "beneficiary_account_type",
  "beneficiary_institution",
  "beneficiary_name",
  "beneficiary_rfc_curp",
  "beneficiary_email",
  "payment_concept",
  "numeric_reference",
  "entry_id",
  "created_at",
  "updated_at",
] as const;

const columnTypes: Record<(typeof orderColumns)[number], string> = {
  id: "uuid",
  client_id: "uuid",
  payer_account_id: "uuid",
  card_id: "uuid",
  tracking_key: "text",
  operation_date: "date",
  amount_cents: "bigint",
  commission_cents: "bigint",
  iva_cents: "bigint",
  beneficiary_account: "text",
  beneficiary_card_sealed: "text",
  beneficiary_account_type: "text",
  beneficiary_institution: "text",
  beneficiary_name: "text",
  beneficiary_rfc_curp: "text",
  beneficiary_email: "text",
  payment_concept: "text",
  numeric_reference: "text",
  entry_id: "uuid",
  created_at: "timestamptz",
  updated_at: "timestamptz",
};

/**
 * The orders and their rail jobs. `leaseSeconds`: the jobs are leased to this process for that
 * long, as a claim would lease them (one attempt counted), because it hands them over itself.
 */
function ordersCte(transfers: BatchedTransfer[], leaseSeconds: number | undefined) {
  const arrays = orderColumns.map((column) => {
    const values = transfers.map(({ row }) => {
      const value = row[column];
      if (value === null || value === undefined) return null;
      return value instanceof Date ? value.toISOString() : String(value);
    });
    return sql`${values}::${sql.raw(columnTypes[column])}[]`;
  });
  return sql`orders as (
      insert into spei_orders (${sql.raw(orderColumns.join(", "))})
      select * from unnest(${sql.join(arrays)})
      on conflict (operation_date, tracking_key) do nothing
      returning id),
    jobs as (
      insert into rail_outbox (rail, ref_id, attempts, next_attempt_at)
      select 'SPEI', id, ${leaseSeconds === undefined ? 0 : 1}, now() + ${leaseSeconds ?? 0}::integer * interval '1 second'
      from orders
      returning id, ref_id)`;
}

/**
 * A batch of transfers out as ONE statement, its own transaction, its steps in the order of the
 * target list (a scalar subquery runs where it first appears): the cards, each reached by its key
 * (a lateral lookup, as the ledger's batch reaches its accounts), locked in id order and
 * still as each transfer was decided on (ACTIVE, the PIN's verification value, no wrong PIN counted,
 * the product's commission); the ledger, its rows locked in the ledger's order (each card must still
 * cover its transfers); then the orders (whose references to those rows take locks already held),
 * their rail jobs and events; last the idempotency keys, which must all be new. Every lock is thus
 * taken in the order a transfer on its own takes them: cards, then their balances, then the shared
 * rows. Any check that fails raises EM001 (emisor_require) and the statement writes nothing: the
 * caller then runs each transfer on its own, which answers each its own refusal. Answers the orders'
 * rail jobs, leased for `leaseSeconds` when given (see ordersCte).
 */
export async function writeTransfersAtOnce(
  db: Db,
  transfers: BatchedTransfer[],
  leaseSeconds?: number,
): Promise<RailJob[]> {
  const cards = new Map(transfers.map((t) => [t.card.id, t.card]));
  const cardRows = [...cards.values()];
  const ledger = ledgerBatch(transfers.map((t) => t.entry));
  const records = transfers.flatMap((t) => (t.record ? [t.record] : []));
  const result = await sql<{ jobs: { id: string; ref_id: string }[] | null }>`
    with ${eventsWithDeliveries(transfers.map((t) => t.event))},
    ${ordersCte(transfers, leaseSeconds)},
    cards_as_decided as (
      select c.id
      from (select * from unnest(${cardRows.map((c) => c.id)}::uuid[], ${cardRows.map((c) => c.pinHash)}::text[],
          ${cardRows.map((c) => String(c.commissionCents))}::bigint[]) as v(id, pin_hash, commission_cents)
        order by v.id) v
      cross join lateral (
        select c.id, c.status, c.pin_hash, c.pin_locked, c.pin_failed_attempts, c.product_id from cards c
        where c.id = v.id for update) c
      join products p on p.id = c.product_id
      where c.status = 'ACTIVE' and c.pin_hash = v.pin_hash and not c.pin_locked and c.pin_failed_attempts = 0
        and p.transfer_commission_cents = v.commission_cents),
    ${ledger.ctes},
    ${keyRecordsCte(records, sql`on conflict do nothing`)}
    select
      emisor_require((select count(*) from cards_as_decided) = ${cardRows.length}, 'a card changed') as cards,
      ${ledger.steps},
      emisor_require((select count(*) from orders) = ${transfers.length}, 'a tracking key is taken') as orders,
      (select json_agg(json_build_object('id', id::text, 'ref_id', ref_id) order by id) from jobs) as jobs,
      (select count(*) from outbox_events) + (select count(*) from outbox_deliveries) as events,
      emisor_require((select count(*) from keys) = ${records.length}, 'an idempotency key is taken') as keyed`.execute(
    db,
  );
  return (result.rows[0]?.jobs ?? []).map((job) => ({
    id: BigInt(job.id),
    refId: job.ref_id,
    attempts: leaseSeconds === undefined ? 0 : 1,
  }));
}
