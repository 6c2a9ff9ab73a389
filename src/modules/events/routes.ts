import type { FastifyInstance } from "fastify";
import type { Static } from "typebox";
import type { AppContext } from "../../context.ts";
import { ok } from "../../http/envelope.ts";
import type { Operation } from "../../http/operation.ts";
import { bearerAuth, responses } from "../../http/schemas.ts";
import { limits } from "../../limits.ts";
import { EventListData, ListEventsQuery } from "./schemas.ts";
import { listEvents } from "./service.ts";

const listEventsRoute: Operation = (app, ctx) => {
  app.get<{ Querystring: Static<typeof ListEventsQuery> }>(
    "/v1/events",
    {
      schema: {
        tags: ["events"],
        operationId: "listEvents",
        summary: "List events",
        description:
          "Your events and your sub-clients', in the order of the transactions that wrote them, each listed once no running change can add one before it; filter by type, client and creation time; page with `after` = the previous `next_cursor`.",
        security: bearerAuth,
        querystring: ListEventsQuery,
        response: responses(EventListData),
      },
    },
    async (request) =>
      ok(
        await listEvents(
          ctx.db,
          request.caller,
          { ...request.query, limit: request.query.limit ?? limits.pageSizeDefault },
          ctx.listings,
        ),
      ),
  );
};

/** GET /v1/events: the caller's events and its sub-clients', paginated forward by cursor. */
export function registerEventRoutes(app: FastifyInstance, ctx: AppContext): void {
  for (const operation of [listEventsRoute]) operation(app, ctx);
}
