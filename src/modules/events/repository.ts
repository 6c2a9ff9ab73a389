import { sql } from "kysely";
import type { Queryable } from "../../db/database.ts";

/** SQL of the events module: reading the outbox within a client's subtree. */
export interface EventRow {
  id: string;
  seq: bigint;
  type: string;
  client_id: string;
  data: unknown;
  created_at: Date;
}

export interface EventFilter {
  /** Events of clients in this client's subtree (itself and its descendants). */
  scopeClientId: string;
  /** Only this client's own events. */
  clientId?: string | undefined;
  types?: readonly string[] | undefined;
  createdFrom?: Date | undefined;
  createdTo?: Date | undefined;
  afterSeq?: bigint | undefined;
  limit: number;
}

function inScope(db: Queryable, scopeClientId: string) {
  return db
    .selectFrom("events as e")
    .innerJoin("clients as c", "c.id", "e.client_id")
    .select(["e.id", "e.seq", "e.type", "e.client_id", "e.data", "e.created_at"])
    .where(sql<boolean>`${scopeClientId}::uuid = any(c.lineage)`);
}

/** Events in seq order after the cursor, at most `limit`. */
export async function listEventsInScope(db: Queryable, filter: EventFilter): Promise<EventRow[]> {
  let query = inScope(db, filter.scopeClientId);
  if (filter.clientId) query = query.where("e.client_id", "=", filter.clientId);
  if (filter.types && filter.types.length > 0) query = query.where("e.type", "in", [...filter.types]);
  if (filter.createdFrom) query = query.where("e.created_at", ">=", filter.createdFrom);
  if (filter.createdTo) query = query.where("e.created_at", "<", filter.createdTo);
  if (filter.afterSeq !== undefined) query = query.where("e.seq", ">", filter.afterSeq);
  return query.orderBy("e.seq").limit(filter.limit).execute();
}

/** One event, when its client is `scopeClientId` or one of its descendants. */
export async function findEventInScope(
  db: Queryable,
  scopeClientId: string,
  eventId: string,
): Promise<EventRow | undefined> {
  return inScope(db, scopeClientId).where("e.id", "=", eventId).executeTakeFirst();
}
