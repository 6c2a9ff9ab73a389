import { randomUUID } from "node:crypto";
import { type Selectable, sql } from "kysely";
import type { Queryable, Tx } from "../../db/database.ts";
import type {
  DeliveryKind,
  RetiredSecret,
  WebhookDeliveriesTable,
  WebhookEndpointsTable,
} from "../../db/schema.ts";

/** SQL of the webhooks module: endpoints, their deliveries, and what delivery workers claim. */
export type EndpointRow = Omit<Selectable<WebhookEndpointsTable>, "secret_sealed" | "retired_secrets">;
export type DeliveryRow = Selectable<WebhookDeliveriesTable> & { event_type: string };

/** Every column the API may show: the sealed secrets never leave this file except to a worker. */
const endpointColumns = [
  "w.id",
  "w.client_id",
  "w.url",
  "w.description",
  "w.event_types",
  "w.include_subclients",
  "w.status",
  "w.disabled_reason",
  "w.disabled_at",
  "w.failure_streak",
  "w.last_success_at",
  "w.last_failure_at",
  "w.last_error",
  "w.created_at",
  "w.updated_at",
] as const;

const inSubtreeOf = (scopeClientId: string) => sql<boolean>`${scopeClientId}::uuid = any(c.lineage)`;

export async function insertEndpoint(
  tx: Tx,
  row: {
    id: string;
    clientId: string;
    url: string;
    description: string | null;
    eventTypes: string[] | null;
    includeSubclients: boolean;
    secretSealed: string;
  },
): Promise<void> {
  await tx
    .insertInto("webhook_endpoints")
    .values({
      id: row.id,
      client_id: row.clientId,
      url: row.url,
      description: row.description,
      event_types: row.eventTypes,
      include_subclients: row.includeSubclients,
      secret_sealed: row.secretSealed,
    })
    .execute();
}

/** Serialises endpoint creation per client (so the count bound holds under concurrency). */
export async function lockClientEndpoints(tx: Tx, clientId: string): Promise<void> {
  await sql`select id from clients where id = ${clientId} for no key update`.execute(tx);
}

export async function countEndpoints(tx: Tx, clientId: string): Promise<number> {
  const row = await tx
    .selectFrom("webhook_endpoints")
    .select((eb) => eb.fn.countAll<bigint>().as("n"))
    .where("client_id", "=", clientId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** An endpoint whose owner is `scopeClientId` or one of its descendants. */
export async function findEndpointInScope(
  db: Queryable,
  scopeClientId: string,
  id: string,
): Promise<EndpointRow | undefined> {
  return db
    .selectFrom("webhook_endpoints as w")
    .innerJoin("clients as c", "c.id", "w.client_id")
    .select(endpointColumns)
    .where("w.id", "=", id)
    .where(inSubtreeOf(scopeClientId))
    .executeTakeFirst();
}

export async function listEndpointsInScope(
  db: Queryable,
  filter: { scopeClientId: string; clientId?: string | undefined; offset: number; limit: number },
): Promise<{ rows: EndpointRow[]; total: number }> {
  let base = db
    .selectFrom("webhook_endpoints as w")
    .innerJoin("clients as c", "c.id", "w.client_id")
    .where(inSubtreeOf(filter.scopeClientId));
  if (filter.clientId) base = base.where("w.client_id", "=", filter.clientId);
  const rows = await base
    .select(endpointColumns)
    .orderBy("w.created_at")
    .orderBy("w.id")
    .offset(filter.offset)
    .limit(filter.limit)
    .execute();
  const count = await base.select((eb) => eb.fn.countAll<bigint>().as("n")).executeTakeFirstOrThrow();
  return { rows, total: Number(count.n) };
}

export async function deleteEndpoint(db: Queryable, id: string): Promise<void> {
  await db.deleteFrom("webhook_endpoints").where("id", "=", id).execute();
}

export async function enableEndpoint(db: Queryable, id: string): Promise<void> {
  await db
    .updateTable("webhook_endpoints")
    .set({
      status: "ENABLED",
      disabled_reason: null,
      disabled_at: null,
      failure_streak: 0,
      updated_at: new Date(),
    })
    .where("id", "=", id)
    .execute();
}

/**
 * Replaces the secret of an endpoint locked by `lockEndpoint`: the replaced one joins the retired
 * secrets (signing until `retiredUntil`), which keep their own expiries; expired ones are dropped
 * and, past `keep`, the oldest.
 */
export async function rotateSecret(
  tx: Tx,
  locked: LockedEndpoint,
  secretSealed: string,
  retiredUntil: Date,
  keep: number,
): Promise<void> {
  const now = Date.now();
  const retired = [
    ...locked.retired_secrets.filter((secret) => Date.parse(secret.expires_at) > now),
    { sealed: locked.secret_sealed, expires_at: retiredUntil.toISOString() },
  ].slice(-keep);
  await tx
    .updateTable("webhook_endpoints")
    .set({ secret_sealed: secretSealed, retired_secrets: JSON.stringify(retired), updated_at: new Date() })
    .where("id", "=", locked.id)
    .execute();
}

export interface LockedEndpoint {
  id: string;
  secret_sealed: string;
  retired_secrets: RetiredSecret[];
}

export async function lockEndpoint(tx: Tx, id: string): Promise<LockedEndpoint | undefined> {
  return tx
    .selectFrom("webhook_endpoints")
    .select(["id", "secret_sealed", "retired_secrets"])
    .where("id", "=", id)
    .forUpdate()
    .executeTakeFirst();
}

const deliveryColumns = [
  "d.id",
  "d.event_id",
  "d.endpoint_id",
  "d.kind",
  "d.status",
  "d.attempts",
  "d.next_attempt_at",
  "d.last_attempt_at",
  "d.last_status_code",
  "d.last_error",
  "d.delivered_at",
  "d.created_at",
  "e.type as event_type",
] as const;

export async function recentDeliveries(
  db: Queryable,
  endpointId: string,
  limit: number,
): Promise<DeliveryRow[]> {
  return db
    .selectFrom("webhook_deliveries as d")
    .innerJoin("events as e", "e.id", "d.event_id")
    .select(deliveryColumns)
    .where("d.endpoint_id", "=", endpointId)
    .orderBy("d.created_at", "desc")
    .orderBy("d.id", "desc")
    .limit(limit)
    .execute();
}

/** A delivery asked for through the API (a test or a replay), due at once. */
export async function insertDelivery(
  tx: Tx,
  delivery: { eventId: string; endpointId: string; kind: DeliveryKind },
): Promise<DeliveryRow> {
  const id = randomUUID();
  await tx
    .insertInto("webhook_deliveries")
    .values({ id, event_id: delivery.eventId, endpoint_id: delivery.endpointId, kind: delivery.kind })
    .execute();
  return tx
    .selectFrom("webhook_deliveries as d")
    .innerJoin("events as e", "e.id", "d.event_id")
    .select(deliveryColumns)
    .where("d.id", "=", id)
    .executeTakeFirstOrThrow();
}

// --- What delivery workers claim and record. Times come from the database clock (now()), so
// several processes on one database agree on what is due.

export interface ClaimedDelivery {
  id: string;
  /** The attempt this claim is (1 for the first); recording a failure is fenced on it. */
  attempts: number;
  created_at: Date;
  endpoint_id: string;
  /** The endpoint's owner: what the worker's fairness counts by. */
  endpoint_client_id: string;
  url: string;
  secret_sealed: string;
  retired_secrets: RetiredSecret[];
  event_id: string;
  event_type: string;
  event_client_id: string;
  event_data: unknown;
  event_created_at: Date;
}

/**
 * Claims up to `limit` due deliveries of enabled endpoints: each is locked (rows another worker
 * holds are skipped), counted as an attempt and hidden for `leaseMs`, all in one statement.
 * If the worker dies before recording the outcome, the lease runs out and another retries it.
 *
 * Fair between clients (the endpoints' owners): each client's due deliveries are ranked oldest
 * first, at most `perClient` of a client are taken, rank by rank across clients (every client's
 * oldest before anyone's second), and clients in `busyClients` (as many in flight as they may
 * have) get none. One global oldest-first queue let a tenant whose endpoints hang hold every slot
 * for minutes while another tenant's deliveries waited.
 */
export async function claimDueDeliveries(
  db: Queryable,
  limit: number,
  leaseMs: number,
  fairness: { perClient: number; busyClients: string[] } = { perClient: limit, busyClients: [] },
): Promise<ClaimedDelivery[]> {
  const result = await sql<ClaimedDelivery>`
    with ranked as (
      select d.id, d.next_attempt_at,
        row_number() over (partition by w.client_id order by d.next_attempt_at, d.id) as client_rank
      from webhook_deliveries d
      join webhook_endpoints w on w.id = d.endpoint_id
      where d.status = 'PENDING' and d.next_attempt_at <= now() and w.status = 'ENABLED'
        and w.client_id <> all(${fairness.busyClients}::uuid[])
    ),
    due as (
      select d.id
      from webhook_deliveries d
      join ranked r on r.id = d.id
      -- Due again here, at the level that locks: PostgreSQL re-checks these conditions on a row
      -- another worker claimed and committed meanwhile (ranked's read does not), so the row is
      -- skipped rather than claimed twice.
      where r.client_rank <= ${fairness.perClient}
        and d.status = 'PENDING' and d.next_attempt_at <= now()
      order by r.client_rank, r.next_attempt_at
      limit ${limit}
      for update of d skip locked
    )
    update webhook_deliveries d
    set attempts = d.attempts + 1,
        last_attempt_at = now(),
        next_attempt_at = now() + ${leaseMs}::double precision * interval '1 millisecond'
    from due, events e, webhook_endpoints w
    where d.id = due.id and e.id = d.event_id and w.id = d.endpoint_id
    returning d.id, d.attempts, d.created_at, d.endpoint_id, w.client_id as endpoint_client_id,
      w.url, w.secret_sealed,
      w.retired_secrets, e.id as event_id, e.type as event_type,
      e.client_id as event_client_id, e.data as event_data, e.created_at as event_created_at`.execute(db);
  return result.rows;
}

/** A success counts even if the delivery was meanwhile failed (its endpoint was disabled). */
export async function markDelivered(tx: Tx, id: string, statusCode: number): Promise<void> {
  await tx
    .updateTable("webhook_deliveries")
    .set({
      status: "DELIVERED",
      delivered_at: sql`now()`,
      last_status_code: statusCode,
      last_error: null,
    })
    .where("id", "=", id)
    .where("status", "<>", "DELIVERED")
    .execute();
}

/**
 * Records a failed attempt: retried after `retryInMs`, or FAILED when `retryInMs` is null. Only
 * when the row is still at this attempt (false: another worker re-claimed it after the lease).
 */
export async function recordFailedAttempt(
  tx: Tx,
  delivery: { id: string; attempts: number },
  failure: { statusCode: number | null; error: string; retryInMs: number | null },
): Promise<boolean> {
  const result = await tx
    .updateTable("webhook_deliveries")
    .set({
      status: failure.retryInMs === null ? "FAILED" : "PENDING",
      next_attempt_at: sql`now() + ${failure.retryInMs ?? 0}::double precision * interval '1 millisecond'`,
      last_status_code: failure.statusCode,
      last_error: failure.error,
    })
    .where("id", "=", delivery.id)
    .where("attempts", "=", delivery.attempts)
    .where("status", "=", "PENDING")
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** A worker stopping mid-attempt gives the delivery back, uncounted. */
export async function releaseClaim(db: Queryable, delivery: { id: string; attempts: number }): Promise<void> {
  await db
    .updateTable("webhook_deliveries")
    .set((eb) => ({ attempts: eb("attempts", "-", 1), next_attempt_at: sql`now()` }))
    .where("id", "=", delivery.id)
    .where("attempts", "=", delivery.attempts)
    .where("status", "=", "PENDING")
    .execute();
}

export async function noteEndpointSuccess(tx: Tx, endpointId: string): Promise<void> {
  await tx
    .updateTable("webhook_endpoints")
    .set({ failure_streak: 0, last_success_at: sql`now()` })
    .where("id", "=", endpointId)
    .execute();
}

export async function noteEndpointFailure(
  tx: Tx,
  endpointId: string,
  error: string,
): Promise<{ status: string; last_success_at: Date | null } | undefined> {
  return tx
    .updateTable("webhook_endpoints")
    .set((eb) => ({
      failure_streak: eb("failure_streak", "+", 1),
      last_failure_at: sql`now()`,
      last_error: error,
    }))
    .where("id", "=", endpointId)
    .returning(["status", "last_success_at"])
    .executeTakeFirst();
}

/** Disables an endpoint with the reason its owner will read; its pending deliveries fail. */
export async function disableEndpoint(tx: Tx, endpointId: string, reason: string): Promise<void> {
  await tx
    .updateTable("webhook_endpoints")
    .set({ status: "DISABLED", disabled_reason: reason, disabled_at: sql`now()`, updated_at: sql`now()` })
    .where("id", "=", endpointId)
    .where("status", "=", "ENABLED")
    .execute();
  await tx
    .updateTable("webhook_deliveries")
    .set({ status: "FAILED", last_error: "endpoint disabled before this delivery succeeded" })
    .where("endpoint_id", "=", endpointId)
    .where("status", "=", "PENDING")
    .execute();
}
