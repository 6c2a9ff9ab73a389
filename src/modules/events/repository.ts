import { type RawBuilder, type Selectable, sql } from "kysely";
import type { Queryable, Tx } from "../../db/database.ts";
import { jsonbArray } from "../../db/jsonb-array.ts";
import type { EventsTable } from "../../db/schema.ts";
import { limits } from "../../limits.ts";

/**
 * SQL of the events module, the only code that writes event rows: the outbox (each event with its
 * webhook deliveries), and reading it within a client's subtree.
 */

/** An event as stored; its xid (the writing transaction's, as text) and seq place it in the listing. */
export type EventRow = Selectable<EventsTable>;

/** A place in the listing: events come in (xid, seq) order. */
export interface EventPosition {
  xid: string;
  seq: bigint;
}

export interface EventFilter {
  /** Events of clients in this client's subtree (itself and its descendants). */
  scopeClientId: string;
  /** Only this client's own events. */
  clientId?: string | undefined;
  types?: readonly string[] | undefined;
  createdFrom?: Date | undefined;
  createdTo?: Date | undefined;
  after?: EventPosition | undefined;
  /** Only events of transactions below this id (see `eventHorizon`). */
  horizon: string;
  limit: number;
}

function inScope(db: Queryable, scopeClientId: string) {
  return db
    .selectFrom("events as e")
    .innerJoin("clients as c", "c.id", "e.client_id")
    .select([
      "e.id",
      sql<string>`e.xid::text`.as("xid"),
      "e.seq",
      "e.type",
      "e.client_id",
      "e.data",
      "e.created_at",
    ])
    .where(sql<boolean>`${scopeClientId}::uuid = any(c.lineage)`);
}

/**
 * The listing's horizon: an id below every transaction of this database that is still running,
 * and no higher than the next transaction's. Every event of a transaction below it is committed
 * or rolled back for good when this returns, so a later statement that lists only those sees
 * every one of them, and no event can land below it afterwards.
 *
 * Read in its own statement, before the listing's: the statement's snapshot is taken first, then
 * the running transactions (pg_stat_activity, whose transaction ids every role may read); a
 * transaction that ends in between is simply not counted, and the listing's later snapshot sees
 * it ended. Only this database's transactions count, so a long one elsewhere on the server does
 * not hold events back. Running ids are 32-bit there: each is widened to 64 bits next to the
 * snapshot's xmax (running ids are within 2^31 of it, on either side).
 */
export async function eventHorizon(db: Queryable): Promise<string> {
  const result = await sql<{ horizon: string }>`
    with s as (select pg_snapshot_xmax(pg_current_snapshot())::text::numeric as next)
    select least(s.next, min(
      s.next + mod(a.backend_xid::text::numeric - mod(s.next, 4294967296) + 6442450944, 4294967296) - 2147483648
    ))::text as horizon
    from s
    left join pg_stat_activity a
      on a.datid = (select oid from pg_database where datname = current_database())
     and a.backend_xid is not null
    group by s.next`.execute(db);
  const horizon = result.rows[0]?.horizon;
  if (horizon === undefined) throw new Error("the events horizon query returned no row");
  return horizon;
}

/**
 * The transactions of this database holding a transaction id (the ones that hold the listing's
 * horizon back), and the age in seconds of the oldest whose start this role may see (another
 * role's is hidden without pg_read_all_stats; 0 when none is seen).
 */
export async function writeTransactionsRunning(
  db: Queryable,
): Promise<{ count: number; oldestSeconds: number }> {
  const result = await sql<{ count: number; oldest: number }>`
    select count(*)::int as count,
      coalesce(extract(epoch from clock_timestamp() - min(xact_start)), 0)::float8 as oldest
    from pg_stat_activity
    where datid = (select oid from pg_database where datname = current_database())
      and backend_xid is not null`.execute(db);
  const row = result.rows[0];
  return { count: row?.count ?? 0, oldestSeconds: row?.oldest ?? 0 };
}

/** The first transaction id among the events (for cursors of releases before 0020). */
export async function firstEventXid(db: Queryable): Promise<string | undefined> {
  // Ordered by the column, not by the text it is selected as ("1018" < "980").
  const result = await sql<{
    first: string;
  }>`select xid::text as first from events order by events.xid limit 1`.execute(db);
  return result.rows[0]?.first;
}

/**
 * The highest transaction id among the events, and the next id this database's cluster will
 * give, when the first is not below the second: the events were written by another cluster (a
 * dump restored here, a logical copy), whose counter ran ahead of this one.
 */
export async function eventXidsAhead(db: Queryable): Promise<{ highest: bigint; next: bigint } | undefined> {
  const result = await sql<{ highest: string | null; next: string }>`
    select (select xid::text from events order by events.xid desc limit 1) as highest,
      pg_snapshot_xmax(pg_current_snapshot())::text as next`.execute(db);
  const row = result.rows[0];
  if (!row?.highest) return undefined;
  const highest = BigInt(row.highest);
  const next = BigInt(row.next);
  return highest >= next ? { highest, next } : undefined;
}

/** Makes the cluster give `count` transaction ids, committing each (nothing else is written). */
export async function consumeTransactionIds(db: Queryable, count: number): Promise<void> {
  await sql
    .raw(
      `do $$ begin for i in 1..${Math.trunc(count)} loop perform pg_current_xact_id(); commit; end loop; end $$`,
    )
    .execute(db);
}

/**
 * Events in (xid, seq) order after the cursor and below the horizon, at most `limit`. A subtree
 * of at most `limits.eventsPerClientScanMax` clients (most callers: a client and its few
 * sub-clients) reads each client's events from its own index range and merges them; a larger
 * one walks the events of every client in order and keeps its own. The walk alone made a small
 * tenant's poll read every other tenant's events since its cursor (a first page: all of them).
 */
export async function listEventsInScope(db: Queryable, filter: EventFilter): Promise<EventRow[]> {
  const clients = filter.clientId
    ? [filter.clientId]
    : (
        await db
          .selectFrom("clients")
          .select("id")
          .where(sql<boolean>`${filter.scopeClientId}::uuid = any(lineage)`)
          .limit(limits.eventsPerClientScanMax + 1)
          .execute()
      ).map((row) => row.id);
  const matching = sql.join(listingConditions(filter), sql` and `);
  const columns = sql`e.id, e.xid::text as xid, e.seq, e.type, e.client_id, e.data, e.created_at`;
  const result =
    filter.clientId || clients.length <= limits.eventsPerClientScanMax
      ? await sql<EventRow>`
          select ${columns}
          from clients c
          cross join lateral (
            select * from events e where e.client_id = c.id and ${matching}
            order by e.xid, e.seq
            limit ${filter.limit}
          ) e
          where c.id = any(${clients}::uuid[]) and ${filter.scopeClientId}::uuid = any(c.lineage)
          order by e.xid, e.seq
          limit ${filter.limit}`.execute(db)
      : await sql<EventRow>`
          select ${columns}
          from events e join clients c on c.id = e.client_id
          where ${filter.scopeClientId}::uuid = any(c.lineage) and ${matching}
          order by e.xid, e.seq
          limit ${filter.limit}`.execute(db);
  return result.rows;
}

/** The filters, the horizon and the cursor, on `events e`. */
function listingConditions(filter: EventFilter): RawBuilder<unknown>[] {
  const conditions: RawBuilder<unknown>[] = [sql`e.xid < ${filter.horizon}::xid8`];
  if (filter.types && filter.types.length > 0)
    conditions.push(sql`e.type = any(${[...filter.types]}::text[])`);
  if (filter.createdFrom) conditions.push(sql`e.created_at >= ${filter.createdFrom}`);
  if (filter.createdTo) conditions.push(sql`e.created_at < ${filter.createdTo}`);
  if (filter.after)
    conditions.push(sql`(e.xid, e.seq) > (${filter.after.xid}::xid8, ${filter.after.seq}::bigint)`);
  return conditions;
}

/** One event, when its client is `scopeClientId` or one of its descendants. */
export async function findEventInScope(
  db: Queryable,
  scopeClientId: string,
  eventId: string,
): Promise<EventRow | undefined> {
  return inScope(db, scopeClientId).where("e.id", "=", eventId).executeTakeFirst();
}

/**
 * Writes events and, in the same statement, one pending delivery per ENABLED endpoint that wants
 * each: the owner's endpoints, and its ancestors' that asked for their sub-clients' events, for
 * every type or for this one. One round trip, however many events (a batch of payments).
 */
export async function insertEventsWithDeliveries(tx: Tx, events: ReadonlyArray<OutboxEvent>): Promise<void> {
  await sql`with ${eventsWithDeliveries(events)} select 1`.execute(tx);
}

export interface OutboxEvent {
  id: string;
  type: string;
  clientId: string;
  /** JSON text. */
  data: string;
}

/**
 * The outbox write as common table expressions (`outbox_events`, `outbox_deliveries`), so a
 * statement that makes a change can write its events in the same round trip: the events, and a
 * delivery for every enabled endpoint that wants each one (the owner's, or an ancestor's that
 * asked for its sub-clients' events).
 */
export function eventsWithDeliveries(events: ReadonlyArray<OutboxEvent>) {
  return sql`
    outbox_events as (
      insert into events (id, type, client_id, data)
      select id, type, client_id, data from unnest(
        ${events.map((x) => x.id)}::uuid[], ${events.map((x) => x.type)}::text[],
        ${events.map((x) => x.clientId)}::uuid[], ${jsonbArray(
          events.map((x) => x.data),
          "json",
        )}
      ) as t(id, type, client_id, data)
      returning id, type, client_id),
    outbox_deliveries as (
      insert into webhook_deliveries (id, event_id, endpoint_id, kind)
      select gen_random_uuid(), e.id, w.id, 'EVENT'
      from outbox_events e
      join clients c on c.id = e.client_id
      join webhook_endpoints w
        on w.client_id = any(c.lineage)
       and (w.client_id = e.client_id or w.include_subclients)
       and (w.event_types is null or e.type = any(w.event_types))
      where w.status = 'ENABLED'
      returning id)`;
}

/** A test event: stored like any event (so it can be listed and replayed), delivered to one endpoint. */
export async function insertTestEvent(
  tx: Tx,
  event: { id: string; type: string; clientId: string; data: unknown },
): Promise<void> {
  await tx
    .insertInto("events")
    .values({ id: event.id, type: event.type, client_id: event.clientId, data: JSON.stringify(event.data) })
    .execute();
}
