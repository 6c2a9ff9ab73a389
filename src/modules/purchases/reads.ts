import type { AppContext } from "../../context.ts";
import { AppError, errors } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import { instantIdPage } from "../../http/cursor.ts";
import { cardOrThrow } from "../cards/service.ts";
import * as repo from "./repository.ts";
import { renderAuthorization, renderAuthorizationMessage } from "./views.ts";

/** GET /v1/authorizations/{id}: one authorization of the caller's subtree, with its messages in order. */
export async function getAuthorization(ctx: AppContext, caller: Caller, id: string) {
  const authorization = await repo.findAuthorizationInScope(ctx.db, caller.clientId, id);
  if (!authorization) throw new AppError(errors.authorizationNotFound);
  const messages = await repo.messagesOf(ctx.db, authorization.id);
  return {
    authorization: {
      ...renderAuthorization(authorization),
      messages: messages.map(renderAuthorizationMessage),
    },
  };
}

/**
 * GET /v1/cards/{id}/authorizations: the card's authorizations, newest first, paged by keyset
 * (created_at, id), so authorizations arriving while a client pages shift nothing.
 */
export async function listAuthorizations(
  ctx: AppContext,
  caller: Caller,
  cardId: string,
  query: { perPage: number; cursor?: string | undefined },
) {
  const listing = [caller.clientId, cardId, query.perPage];
  const { items, nextCursor } = await instantIdPage(
    query,
    listing,
    async (before, limit) => {
      const card = await cardOrThrow(ctx.db, caller, { id: cardId });
      return repo.listCardAuthorizations(await ctx.listings.reader(), card.id, { before, limit });
    },
    (row) => row.created_at_text,
  );
  return { authorizations: items.map(renderAuthorization), next_cursor: nextCursor };
}
