import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../context.ts";
import { ok } from "../../http/envelope.ts";
import type { Operation } from "../../http/operation.ts";
import { bearerAuth, responses } from "../../http/schemas.ts";
import { sendResult } from "../../idempotency/hook.ts";
import {
  CardholderQuery,
  CreateCardholderBody,
  CreatedCardholderData,
  FoundCardholderData,
} from "./schemas.ts";
import { createCardholder, findCardholder } from "./service.ts";

const createCardholderRoute: Operation = (app, ctx) => {
  app.post<{ Body: CreateCardholderBody }>(
    "/v1/cardholders",
    {
      config: { idempotent: true },
      schema: {
        tags: ["cardholders"],
        operationId: "createCardholder",
        summary: "Register a cardholder (contract 4.2)",
        description:
          "For you or, with client_id, one of your sub-clients. rfc and curp are required unless an active product of that client or an ancestor allows them blank. rfc, curp, email (ignoring case) and mobile_phone are unique among all cardholders (4201-4204). Honours Idempotency-Key.",
        security: bearerAuth,
        body: CreateCardholderBody,
        response: responses(CreatedCardholderData),
      },
    },
    async (request, reply) =>
      sendResult(reply, await createCardholder(ctx.db, request.caller, request.body, request.idempotency)),
  );
};

const getCardholderRoute: Operation = (app, ctx) => {
  app.get<{ Querystring: CardholderQuery }>(
    "/v1/cardholders",
    {
      schema: {
        tags: ["cardholders"],
        operationId: "getCardholder",
        summary: "Find a cardholder with its accounts and cards (contract 4.3)",
        description:
          "At least one filter; several are combined with AND. Only your cardholders and your sub-clients' are found. When several match (primary_phone is not unique) the answer is 5201: add another filter.",
        security: bearerAuth,
        querystring: CardholderQuery,
        response: responses(FoundCardholderData),
      },
    },
    async (request) => ok(await findCardholder(ctx.db, ctx.cardholderLookups, request.caller, request.query)),
  );
};

const searchCardholderRoute: Operation = (app, ctx) => {
  app.post<{ Body: CardholderQuery }>(
    "/v1/cardholders/search",
    {
      schema: {
        tags: ["cardholders"],
        operationId: "searchCardholder",
        summary: "Find a cardholder, with the filters in the body (contract 4.3)",
        description:
          "The same filters and answer as GET /v1/cardholders, but in a JSON body, so that RFC, CURP, email and phones stay out of URLs and the access logs of every proxy on the way.",
        security: bearerAuth,
        body: CardholderQuery,
        response: responses(FoundCardholderData),
      },
    },
    async (request) => ok(await findCardholder(ctx.db, ctx.cardholderLookups, request.caller, request.body)),
  );
};

/** POST /v1/cardholders (contract 4.2), GET /v1/cardholders and POST /v1/cardholders/search (4.3). */
export function registerCardholderRoutes(app: FastifyInstance, ctx: AppContext): void {
  for (const operation of [createCardholderRoute, getCardholderRoute, searchCardholderRoute])
    operation(app, ctx);
}
