import type { FastifyInstance } from "fastify";
import type { Static } from "typebox";
import type { AppContext } from "../../context.ts";
import { ok } from "../../http/envelope.ts";
import type { Operation } from "../../http/operation.ts";
import { bearerAuth, pageOf, responses } from "../../http/schemas.ts";
import { sendResult } from "../../idempotency/hook.ts";
import { limits } from "../../limits.ts";
import { CardTransferBody, CardTransferData, sendCardTransfer } from "./card-transfer.ts";
import { listSpeiOrders } from "./order-listing.ts";
import { getSpeiOrder } from "./outgoing.ts";
import {
  ClabeParams,
  CollectionAccountsData,
  OperationsData,
  OperationsQuery,
  type OperationsQueryType,
  OrderParams,
  SpeiOrderData,
  TransferListData,
  TransferListQuery,
  type TransferListQueryType,
} from "./schemas.ts";
import { listCollectionAccounts, listTransferOperations } from "./service.ts";

const listCollectionAccountsRoute: Operation = (app, ctx) => {
  app.get(
    "/v1/transfer/clabe/collection",
    {
      schema: {
        tags: ["transfers"],
        operationId: "listCollectionAccounts",
        summary: "Your collection accounts (CLABE)",
        security: bearerAuth,
        response: responses(CollectionAccountsData),
      },
    },
    async (request) => ok(await listCollectionAccounts(ctx.db, request.caller)),
  );
};

const listIncomingTransfersRoute: Operation = (app, ctx) => {
  app.get<{ Params: Static<typeof ClabeParams>; Querystring: OperationsQueryType }>(
    "/v1/transfer/clabe/collection/:clabe/operations",
    {
      schema: {
        tags: ["transfers"],
        operationId: "listIncomingTransfers",
        summary: "Incoming transfers of a collection account (contract 4.8), newest first",
        description:
          "Paged by page/per_page or by cursor (next_cursor of the previous page). The CLABE must be yours or a sub-client's.",
        security: bearerAuth,
        params: ClabeParams,
        querystring: OperationsQuery,
        response: responses(OperationsData),
      },
    },
    async (request) => {
      const q = request.query;
      const data = await listTransferOperations(
        ctx.db,
        request.caller,
        request.params.clabe,
        {
          initDate: q.init_date,
          endDate: q.end_date,
          ...pageOf(q, { cursor: true }),
          cursor: q.cursor,
        },
        ctx.listings,
      );
      return ok(data);
    },
  );
};

const createTransferRoute: Operation = (app, ctx) => {
  app.post<{ Body: Static<typeof CardTransferBody> }>(
    "/v1/transfer/cards",
    {
      config: { idempotent: true, cipheredFields: ["card_number", "pin"], rateLimited: true },
      schema: {
        tags: ["transfers"],
        operationId: "createTransfer",
        summary: "Send a SPEI transfer out, paid by a card (contract 4.10)",
        description:
          "card_number names the paying card (UUID or its 16-digit number ciphered under the system key); it must be ACTIVE and its PIN must match. The card pays amount + the product's FLAT commission + 16% IVA on it. Success message: Operación SPEI® Out exitosa.",
        security: bearerAuth,
        body: CardTransferBody,
        response: responses(CardTransferData),
      },
    },
    async (request, reply) =>
      sendResult(reply, await sendCardTransfer(ctx, request.caller, request.body, request.idempotencyDraft)),
  );
};

const listTransfersRoute: Operation = (app, ctx) => {
  app.get<{ Querystring: TransferListQueryType }>(
    "/v1/transfer/cards",
    {
      schema: {
        tags: ["transfers"],
        operationId: "listTransfers",
        summary: "Your transfers out and your sub-clients', newest first",
        description:
          "Filter by status (states separated by commas), client_id, card_id (the paying card) and creation time; page with cursor = the previous next_cursor, with the same filters and per_page.",
        security: bearerAuth,
        querystring: TransferListQuery,
        response: responses(TransferListData),
      },
    },
    async (request) => {
      const { per_page, ...filters } = request.query;
      return ok(
        await listSpeiOrders(ctx.db, request.caller, {
          ...filters,
          perPage: per_page ?? limits.pageSizeDefault,
        }),
      );
    },
  );
};

const getTransferRoute: Operation = (app, ctx) => {
  app.get<{ Params: Static<typeof OrderParams> }>(
    "/v1/transfer/cards/:id",
    {
      schema: {
        tags: ["transfers"],
        operationId: "getTransfer",
        summary: "The state of a transfer out",
        security: bearerAuth,
        params: OrderParams,
        response: responses(SpeiOrderData),
      },
    },
    async (request) => ok(await getSpeiOrder(ctx.db, request.caller, request.params.id)),
  );
};

/**
 * SPEI: collection accounts and their incoming transfers (4.8), transfer-out orders (their
 * listing and the state of 4.10 orders), the rail's signed callbacks, and the sandbox's drivers
 * of the simulator.
 */
export function registerTransferRoutes(app: FastifyInstance, ctx: AppContext): void {
  for (const operation of [
    listCollectionAccountsRoute,
    listIncomingTransfersRoute,
    createTransferRoute,
    listTransfersRoute,
    getTransferRoute,
  ])
    operation(app, ctx);
}
