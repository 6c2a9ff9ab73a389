import type { Db } from "../../db/database.ts";
import { AppError, errors } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import { createdWindow } from "../../http/schemas.ts";
import { findClientInScope } from "../clients/repository.ts";
import { type EventRow, listEventsInScope } from "./repository.ts";

/** An event as the API lists it and as a webhook delivers it (the body that is signed). */
export interface EventPayload {
  id: string;
  type: string;
  created_at: string;
  client_id: string;
  data: unknown;
}

export function presentEvent(
  row: Pick<EventRow, "id" | "type" | "client_id" | "data" | "created_at">,
): EventPayload {
  return {
    id: row.id,
    type: row.type,
    created_at: row.created_at.toISOString(),
    client_id: row.client_id,
    data: row.data,
  };
}

export interface ListEventsQuery {
  type?: string | undefined;
  client_id?: string | undefined;
  created_from?: string | undefined;
  created_to?: string | undefined;
  after?: string | undefined;
  limit: number;
}

/**
 * The caller's events and its descendants' (the tenancy rule: a caller sees its subtree), in
 * write order, `limit` at a time. `next_cursor` is the cursor of the last event returned (or the
 * one given, when none is), so a client can keep it and ask for what came later.
 */
export async function listEvents(db: Db, caller: Caller, query: ListEventsQuery) {
  const { createdFrom, createdTo } = createdWindow(query.created_from, query.created_to);
  if (query.client_id && !(await findClientInScope(db, caller.clientId, query.client_id)))
    throw new AppError(errors.clientNotFound);
  const rows = await listEventsInScope(db, {
    scopeClientId: caller.clientId,
    clientId: query.client_id,
    types: query.type?.split(","),
    createdFrom,
    createdTo,
    afterSeq: query.after === undefined ? undefined : BigInt(query.after),
    limit: query.limit + 1,
  });
  const page = rows.slice(0, query.limit);
  const last = page.at(-1);
  return {
    events: page.map(presentEvent),
    has_more: rows.length > query.limit,
    next_cursor: last ? String(last.seq) : (query.after ?? null),
  };
}
