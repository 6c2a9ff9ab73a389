import type { Db } from "../../db/database.ts";
import type { ListingReads } from "../../db/listings.ts";
import { AppError, errors, invalidField } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import { createdWindow } from "../../http/schemas.ts";
import { findClientInScope } from "../clients/repository.ts";
import {
  type EventPosition,
  type EventRow,
  eventHorizon,
  firstEventXid,
  listEventsInScope,
} from "./repository.ts";

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

/** A cursor is `<xid>-<seq>`: the place of the last event a page returned. */
function cursorOf(position: EventPosition): string {
  return `${position.xid}-${position.seq}`;
}

const xid8Max = 2n ** 64n - 1n;

/**
 * The place a cursor names. A bare number is a cursor of a release before migration 0020 (a seq):
 * the events it was handed out among all carry that migration's transaction id, the first one.
 */
async function positionOf(db: Db, cursor: string): Promise<EventPosition | undefined> {
  const dash = cursor.indexOf("-");
  if (dash < 0) {
    const xid = await firstEventXid(db);
    return xid === undefined ? undefined : { xid, seq: BigInt(cursor) };
  }
  const xid = cursor.slice(0, dash);
  if (BigInt(xid) > xid8Max) throw invalidField("after", "after", "must be a cursor returned as next_cursor");
  return { xid, seq: BigInt(cursor.slice(dash + 1)) };
}

/**
 * The caller's events and its descendants' (the tenancy rule: a caller sees its subtree), in
 * the order of the transactions that wrote them, `limit` at a time, and only once no running
 * transaction can still add an event before them (see `eventHorizon`): a cursor handed out is
 * never passed by an event committed later. `next_cursor` is the cursor of the last event
 * returned (or the one given, when none is), so a client can keep it and ask for what came later.
 */
export async function listEvents(db: Db, caller: Caller, query: ListEventsQuery, listings: ListingReads) {
  const { createdFrom, createdTo } = createdWindow(query.created_from, query.created_to);
  if (query.client_id && !(await findClientInScope(db, caller.clientId, query.client_id)))
    throw new AppError(errors.clientNotFound);
  const after = query.after === undefined ? undefined : await positionOf(db, query.after);
  // The horizon is the primary's (its running transactions); the replica is read once it has
  // replayed past the moment the horizon was read, so it holds every event below the horizon.
  const horizon = await eventHorizon(db);
  const rows = await listEventsInScope(await listings.reader(), {
    scopeClientId: caller.clientId,
    clientId: query.client_id,
    types: query.type?.split(","),
    createdFrom,
    createdTo,
    after,
    horizon,
    limit: query.limit + 1,
  });
  const page = rows.slice(0, query.limit);
  const last = page.at(-1);
  return {
    events: page.map(presentEvent),
    has_more: rows.length > query.limit,
    next_cursor: last ? cursorOf(last) : (query.after ?? null),
  };
}
