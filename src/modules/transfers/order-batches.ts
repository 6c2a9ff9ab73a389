import { sql } from "kysely";
import type { Queryable, Tx } from "../../db/database.ts";
import type { RailJob } from "../../db/rail-outbox.ts";
import { eventsWithDeliveries, type OutboxEvent } from "../events/repository.ts";
import { orderColumns, type SpeiOrderRow } from "./repository.ts";

/**
 * Statements on many orders at once, for the SPEI workers: a batch of hand-overs or settlements
 * costs a few round trips, not a few per order, so the workers keep up with the requests that
 * create the orders without taking the CPU those requests need. Each reaches its jobs by their
 * keys (`= any(array(...))`), never by a join with the outbox: planned from a queue's statistics,
 * which see it nearly empty, a join may read the whole backlog at every statement.
 */

/**
 * Claims up to `limit` due SPEI jobs, leasing them for `leaseSeconds` (as `claimRailJobs`), with
 * their orders, in one statement. A job whose order is gone has none in `orders`.
 */
export async function claimOrders(
  db: Queryable,
  limit: number,
  leaseSeconds: number,
): Promise<{ jobs: RailJob[]; orders: Map<string, SpeiOrderRow> }> {
  const result = await sql<SpeiOrderRow & { job_id: string; ref_id: string; attempts: number }>`
    with claimed as (
      update rail_outbox set attempts = attempts + 1,
        next_attempt_at = now() + ${leaseSeconds}::integer * interval '1 second'
      where id = any(array(select emisor_due_rail_jobs('SPEI', ${limit})))
      returning id, ref_id, attempts)
    select c.id::text as job_id, c.ref_id, c.attempts, ${orderColumns}
    from claimed c left join spei_orders o on o.id = c.ref_id
    order by c.id`.execute(db);
  const orders = new Map<string, SpeiOrderRow>();
  const jobs = result.rows.map(({ job_id, ref_id, attempts, ...order }) => {
    if (order.id) orders.set(order.id, order);
    return { id: BigInt(job_id), refId: ref_id, attempts: Number(attempts) };
  });
  return { jobs, orders };
}

/** Forgets the jobs of orders with nothing left to send (settled, returned, cancelled, gone). */
export async function completeJobs(db: Queryable, refIds: string[]): Promise<void> {
  if (refIds.length === 0) return;
  await sql`delete from rail_outbox where rail = 'SPEI' and ref_id = any(${refIds}::uuid[])`.execute(db);
}

export interface AcceptedOrder {
  job: RailJob;
  orderId: string;
  railReference: string;
}

/**
 * Records what the rail accepted, as one statement: a PENDIENTE order becomes ENVIADA; the job of
 * an order still in flight waits for the settlement check, and the job of one a callback settled
 * or returned meanwhile is forgotten. The orders are locked in id order first, reached by their
 * ids as an array: planned as a join, a generic plan made while the table was small scanned all
 * of it at every hand-over.
 */
export async function recordAccepted(
  db: Queryable,
  accepted: AcceptedOrder[],
  settlementCheckSeconds: number,
): Promise<void> {
  if (accepted.length === 0) return;
  const ids = accepted.map((a) => a.orderId);
  await sql`
    with v as (
      select * from unnest(${ids}::uuid[], ${accepted.map((a) => a.railReference)}::text[],
        ${accepted.map((a) => String(a.job.id))}::bigint[]) as v(id, rail_reference, job_id)),
    locked as (
      select o.id, o.status from spei_orders o where o.id = any(${ids}::uuid[])
      order by o.id for update),
    sent as (
      update spei_orders o set status = 'ENVIADA', rail_reference = v.rail_reference, sent_at = now(),
        updated_at = now()
      from v join locked l on l.id = v.id
      where o.id = v.id and l.status = 'PENDIENTE' and o.status = 'PENDIENTE'
      returning o.id),
    waiting as (
      update rail_outbox j set last_error = null,
        next_attempt_at = now() + ${settlementCheckSeconds}::integer * interval '1 second'
      from v join locked l on l.id = v.id
      where j.id = v.job_id and l.status = 'ENVIADA'
      returning j.id),
    finished as (
      delete from rail_outbox j
      where j.rail = 'SPEI'
        and j.ref_id = any(array(select l.id from locked l where l.status not in ('PENDIENTE', 'ENVIADA')))
      returning j.id)
    select (select count(*) from sent) as sent, (select count(*) from waiting) as waiting,
      (select count(*) from finished) as finished`.execute(db);
}

export interface OrderKey {
  operationDate: string;
  trackingKey: string;
}

/** The orders of these (operation date, tracking key) pairs, locked in id order. */
export async function lockOrdersByKeys(tx: Tx, keys: OrderKey[]): Promise<SpeiOrderRow[]> {
  const result = await sql<SpeiOrderRow>`
    select ${orderColumns} from spei_orders o
    join unnest(${keys.map((k) => k.operationDate)}::date[], ${keys.map((k) => k.trackingKey)}::text[])
      as v(operation_date, tracking_key)
      on o.operation_date = v.operation_date and o.tracking_key = v.tracking_key
    order by o.id for update of o`.execute(tx);
  return result.rows;
}

/**
 * Settles locked PENDIENTE or ENVIADA orders as `settled` (each row as it is to be after), forgets
 * their jobs and writes their events, as one statement. Raises EM001 if an order was not in flight.
 */
export async function settleOrdersAtOnce(
  tx: Tx,
  settled: SpeiOrderRow[],
  events: OutboxEvent[],
): Promise<void> {
  await sql`
    with ${eventsWithDeliveries(events)},
    settled as (
      update spei_orders o set status = 'LIQUIDADA', settled_at = v.settled_at, state_detail = v.state_detail,
        updated_at = v.updated_at
      from unnest(${settled.map((o) => o.id)}::uuid[], ${settled.map((o) => o.settled_at?.toISOString())}::timestamptz[],
        ${settled.map((o) => o.state_detail)}::text[], ${settled.map((o) => o.updated_at.toISOString())}::timestamptz[])
        as v(id, settled_at, state_detail, updated_at)
      where o.id = v.id and o.status in ('PENDIENTE', 'ENVIADA')
      returning o.id),
    jobs as (
      delete from rail_outbox j where j.rail = 'SPEI' and j.ref_id = any(array(select id from settled))
      returning j.id)
    select emisor_require((select count(*) from settled) = ${settled.length}, 'an order left flight') as settled,
      (select count(*) from jobs) as jobs,
      (select count(*) from outbox_events) + (select count(*) from outbox_deliveries) as events`.execute(tx);
}
