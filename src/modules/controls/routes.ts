import type { FastifyInstance } from "fastify";
import type { Static } from "typebox";
import type { AppContext } from "../../context.ts";
import { ok } from "../../http/envelope.ts";
import type { Operation } from "../../http/operation.ts";
import { bearerAuth, responses } from "../../http/schemas.ts";
import { sendResult } from "../../idempotency/hook.ts";
import { CardParams } from "../cards/schemas.ts";
import {
  CardSpendingControlsData,
  CreateSpendingControlBody,
  DeletedSpendingControlData,
  ListSpendingControlsQuery,
  SpendingControlData,
  SpendingControlListData,
  SpendingControlParams,
  UpdateSpendingControlBody,
} from "./schemas.ts";
import * as service from "./service.ts";

const common = { tags: ["spending controls"], security: bearerAuth };
type ById = { Params: Static<typeof SpendingControlParams> };

const createSpendingControlRoute: Operation = (app, ctx) => {
  app.post<{ Body: Static<typeof CreateSpendingControlBody> }>(
    "/v1/spending_controls",
    {
      config: { idempotent: true },
      schema: {
        ...common,
        operationId: "createSpendingControl",
        summary: "Set a spending control on a product, client, cardholder or card of your subtree",
        description:
          "Every control in scope of a card must pass for a purchase to be approved (the strictest wins), so a sub-client's control can only narrow its ancestors'. Declines: CHANNEL_BLOCKED, COUNTRY_BLOCKED, MCC_BLOCKED, AMOUNT_ABOVE_MAXIMUM, SPENDING_LIMIT_EXCEEDED.",
        body: CreateSpendingControlBody,
        response: responses(SpendingControlData),
      },
    },
    async (request, reply) =>
      sendResult(
        reply,
        await service.createSpendingControl(ctx, request.caller, request.body, request.idempotency),
      ),
  );
};

const listSpendingControlsRoute: Operation = (app, ctx) => {
  app.get<{ Querystring: Static<typeof ListSpendingControlsQuery> }>(
    "/v1/spending_controls",
    {
      schema: {
        ...common,
        operationId: "listSpendingControls",
        summary: "The spending controls you and your sub-clients set, newest first",
        querystring: ListSpendingControlsQuery,
        response: responses(SpendingControlListData),
      },
    },
    async (request) =>
      ok(
        await service.listSpendingControls(ctx, request.caller, {
          scope: request.query.scope,
          targetId: request.query.target_id,
          perPage: request.query.per_page ?? 25,
          cursor: request.query.cursor,
        }),
      ),
  );
};

const getSpendingControlRoute: Operation = (app, ctx) => {
  app.get<ById>(
    "/v1/spending_controls/:id",
    {
      schema: {
        ...common,
        operationId: "getSpendingControl",
        summary: "A spending control you or a sub-client set",
        params: SpendingControlParams,
        response: responses(SpendingControlData),
      },
    },
    async (request) => ok(await service.getSpendingControl(ctx, request.caller, request.params.id)),
  );
};

const updateSpendingControlRoute: Operation = (app, ctx) => {
  app.put<ById & { Body: Static<typeof UpdateSpendingControlBody> }>(
    "/v1/spending_controls/:id",
    {
      schema: {
        ...common,
        operationId: "updateSpendingControl",
        summary: "Replace a spending control's rule (its scope, target and type stay)",
        params: SpendingControlParams,
        body: UpdateSpendingControlBody,
        response: responses(SpendingControlData),
      },
    },
    async (request) =>
      ok(await service.updateSpendingControl(ctx, request.caller, request.params.id, request.body)),
  );
};

const deleteSpendingControlRoute: Operation = (app, ctx) => {
  app.delete<ById>(
    "/v1/spending_controls/:id",
    {
      schema: {
        ...common,
        operationId: "deleteSpendingControl",
        summary: "Delete a spending control",
        params: SpendingControlParams,
        response: responses(DeletedSpendingControlData),
      },
    },
    async (request) => ok(await service.deleteSpendingControl(ctx, request.caller, request.params.id)),
  );
};

const listCardSpendingControlsRoute: Operation = (app, ctx) => {
  app.get<{ Params: Static<typeof CardParams> }>(
    "/v1/cards/:id/spending_controls",
    {
      schema: {
        ...common,
        operationId: "listCardSpendingControls",
        summary:
          "A card's effective spending controls from every scope, with what each window used and has left",
        params: CardParams,
        response: responses(CardSpendingControlsData),
      },
    },
    async (request) => ok(await service.cardSpendingControls(ctx, request.caller, request.params.id)),
  );
};

export function registerSpendingControlRoutes(app: FastifyInstance, ctx: AppContext): void {
  for (const operation of [
    createSpendingControlRoute,
    listSpendingControlsRoute,
    getSpendingControlRoute,
    updateSpendingControlRoute,
    deleteSpendingControlRoute,
    listCardSpendingControlsRoute,
  ])
    operation(app, ctx);
}
