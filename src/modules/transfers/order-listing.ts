import type { Db } from "../../db/database.ts";
import type { SpeiOrderStatus } from "../../db/schema.ts";
import { AppError, errors } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import { instantIdPage } from "../../http/cursor.ts";
import { createdWindow } from "../../http/schemas.ts";
import { findCardInScope } from "../cards/repository.ts";
import { findClientInScope } from "../clients/repository.ts";
import { listOrdersInScope } from "./repository.ts";
import { renderOrder } from "./views.ts";

export interface TransferListQuery {
  status?: string | undefined;
  client_id?: string | undefined;
  card_id?: string | undefined;
  created_from?: string | undefined;
  created_to?: string | undefined;
  perPage: number;
  cursor?: string | undefined;
}

/**
 * GET /v1/transfer/cards: the transfers out of the caller's subtree, newest first, for
 * reconciliation. Paged by keyset on (created_at, id) with an opaque cursor bound to the filters
 * and per_page, so transfers created while a client pages shift nothing: they are newer than
 * the walk's position and show at the top of a new listing.
 */
export async function listSpeiOrders(db: Db, caller: Caller, query: TransferListQuery) {
  const { createdFrom, createdTo } = createdWindow(query.created_from, query.created_to);
  const statuses = query.status ? [...new Set(query.status.split(","))].sort() : [];
  const listing = [
    caller.clientId,
    statuses.join(","),
    query.client_id ?? "",
    query.card_id ?? "",
    createdFrom?.toISOString() ?? "",
    createdTo?.toISOString() ?? "",
    query.perPage,
  ];
  const { items, nextCursor } = await instantIdPage(
    query,
    listing,
    async (before, limit) => {
      if (query.client_id && !(await findClientInScope(db, caller.clientId, query.client_id)))
        throw new AppError(errors.clientNotFound);
      if (query.card_id && !(await findCardInScope(db, caller.clientId, { id: query.card_id })))
        throw new AppError(errors.cardNotFound);
      return listOrdersInScope(db, {
        scopeClientId: caller.clientId,
        clientId: query.client_id,
        cardId: query.card_id,
        statuses: statuses as SpeiOrderStatus[],
        createdFrom,
        createdTo,
        before,
        limit,
      });
    },
    (row) => row.created_key,
  );
  return { transfers: items.map(renderOrder), per_page: query.perPage, next_cursor: nextCursor };
}
