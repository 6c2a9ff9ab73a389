import type { FastifyInstance } from "fastify";
import type { Static } from "typebox";
import type { AppContext } from "../../context.ts";
import { ok } from "../../http/envelope.ts";
import type { Operation } from "../../http/operation.ts";
import { bearerAuth, responses } from "../../http/schemas.ts";
import { CardParams } from "../cards/schemas.ts";
import { getAuthorization, listAuthorizations } from "./reads.ts";
import {
  AuthorizationData,
  AuthorizationListData,
  AuthorizationParams,
  CardAuthorizationsQuery,
} from "./schemas.ts";

const tags = ["card purchases"];

const listCardAuthorizationsRoute: Operation = (app, ctx) => {
  app.get<{ Params: Static<typeof CardParams>; Querystring: Static<typeof CardAuthorizationsQuery> }>(
    "/v1/cards/:id/authorizations",
    {
      schema: {
        tags,
        operationId: "listCardAuthorizations",
        summary: "A card's authorizations and force posts, newest first",
        description:
          "Status PENDING (holding), SETTLED, VOIDED, EXPIRED or DECLINED, with amounts authorized, held now and cleared. Page with cursor = the previous page's next_cursor and the same per_page.",
        security: bearerAuth,
        params: CardParams,
        querystring: CardAuthorizationsQuery,
        response: responses(AuthorizationListData),
      },
    },
    async (request) =>
      ok(
        await listAuthorizations(ctx, request.caller, request.params.id, {
          perPage: request.query.per_page ?? 25,
          cursor: request.query.cursor,
        }),
      ),
  );
};

const getAuthorizationRoute: Operation = (app, ctx) => {
  app.get<{ Params: Static<typeof AuthorizationParams> }>(
    "/v1/authorizations/:id",
    {
      schema: {
        tags,
        operationId: "getAuthorization",
        summary: "An authorization, with every message that touched it, in order",
        security: bearerAuth,
        params: AuthorizationParams,
        response: responses(AuthorizationData),
      },
    },
    async (request) => ok(await getAuthorization(ctx, request.caller, request.params.id)),
  );
};

export function registerPurchaseRoutes(app: FastifyInstance, ctx: AppContext): void {
  for (const operation of [listCardAuthorizationsRoute, getAuthorizationRoute]) operation(app, ctx);
}
