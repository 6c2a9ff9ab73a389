import { type Selectable, sql } from "kysely";
import type { Queryable, Tx } from "../../db/database.ts";
import type { AuthorizationEndpointsTable, RetiredSecret, StandIn } from "../../db/schema.ts";

/** SQL of the decisions module: each client's authorization decision endpoint. */
export type EndpointRow = Omit<Selectable<AuthorizationEndpointsTable>, "secret_sealed" | "retired_secrets">;

/** An endpoint with its sealed secrets, for the call (never for a response). */
export type SealedEndpointRow = Selectable<AuthorizationEndpointsTable>;

const endpointColumns = ["client_id", "url", "timeout_ms", "stand_in", "created_at", "updated_at"] as const;

/**
 * Registers or replaces the client's endpoint. A replacement keeps the signing secret (the
 * client stored it once); `secretSealed` is used only when the row is new. `created` tells which.
 */
export async function upsertEndpoint(
  tx: Tx,
  endpoint: { clientId: string; url: string; timeoutMs: number; standIn: StandIn; secretSealed: string },
): Promise<{ row: EndpointRow; created: boolean }> {
  const result = await sql<EndpointRow & { created: boolean }>`
    insert into authorization_endpoints (client_id, url, timeout_ms, stand_in, secret_sealed)
    values (${endpoint.clientId}, ${endpoint.url}, ${endpoint.timeoutMs}, ${endpoint.standIn},
      ${endpoint.secretSealed})
    on conflict (client_id) do update
    set url = excluded.url, timeout_ms = excluded.timeout_ms, stand_in = excluded.stand_in,
      updated_at = now()
    returning client_id, url, timeout_ms, stand_in, created_at, updated_at,
      -- A row the statement inserted has no deleting or locking transaction yet.
      (xmax = 0) as created`.execute(tx);
  const [first] = result.rows;
  if (!first) throw new Error("an upsert of an authorization endpoint returned no row");
  const { created, ...row } = first;
  return { row, created };
}

export async function findOwnEndpoint(db: Queryable, clientId: string): Promise<EndpointRow | undefined> {
  return db
    .selectFrom("authorization_endpoints")
    .select(endpointColumns)
    .where("client_id", "=", clientId)
    .executeTakeFirst();
}

/**
 * The endpoint each client uses: its own, or its nearest ancestor's, in one statement. The
 * lineage runs from the root down to the client, so the nearest owner has the highest position
 * in it. Clients without any are absent from the answer.
 */
export async function findEffectiveEndpoints(
  db: Queryable,
  clientIds: readonly string[],
): Promise<Map<string, SealedEndpointRow>> {
  const result = await sql<SealedEndpointRow & { for_client_id: string }>`
    select distinct on (c.id) c.id as for_client_id, e.client_id, e.url, e.timeout_ms, e.stand_in,
      e.secret_sealed, e.retired_secrets, e.created_at, e.updated_at
    from clients c
    join authorization_endpoints e on e.client_id = any(c.lineage)
    where c.id = any(${[...clientIds]}::uuid[])
    order by c.id, array_position(c.lineage, e.client_id) desc`.execute(db);
  return new Map(result.rows.map(({ for_client_id, ...row }) => [for_client_id, row]));
}

/** Deletes the client's own endpoint; false when it had none. */
export async function deleteEndpoint(db: Queryable, clientId: string): Promise<boolean> {
  const result = await db
    .deleteFrom("authorization_endpoints")
    .where("client_id", "=", clientId)
    .executeTakeFirst();
  return result.numDeletedRows > 0n;
}

export interface LockedEndpoint {
  client_id: string;
  secret_sealed: string;
  retired_secrets: RetiredSecret[];
}

export async function lockOwnEndpoint(tx: Tx, clientId: string): Promise<LockedEndpoint | undefined> {
  return tx
    .selectFrom("authorization_endpoints")
    .select(["client_id", "secret_sealed", "retired_secrets"])
    .where("client_id", "=", clientId)
    .forUpdate()
    .executeTakeFirst();
}

/**
 * Replaces the signing secret; the replaced one keeps signing until `retiredUntil`, with those
 * retired before that have not expired, the newest `keep` of them.
 */
export async function rotateSecret(
  tx: Tx,
  locked: LockedEndpoint,
  secretSealed: string,
  retiredUntil: Date,
  keep: number,
): Promise<EndpointRow> {
  const now = Date.now();
  const retired = [
    ...locked.retired_secrets.filter((secret) => Date.parse(secret.expires_at) > now),
    { sealed: locked.secret_sealed, expires_at: retiredUntil.toISOString() },
  ].slice(-keep);
  return tx
    .updateTable("authorization_endpoints")
    .set({ secret_sealed: secretSealed, retired_secrets: JSON.stringify(retired), updated_at: new Date() })
    .where("client_id", "=", locked.client_id)
    .returning(endpointColumns)
    .executeTakeFirstOrThrow();
}
