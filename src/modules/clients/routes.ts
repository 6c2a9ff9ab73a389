import type { FastifyInstance } from "fastify";
import type { Static } from "typebox";
import type { AppContext } from "../../context.ts";
import { ok } from "../../http/envelope.ts";
import type { Operation } from "../../http/operation.ts";
import { bearerAuth, pageOf, responses } from "../../http/schemas.ts";
import { sendResult } from "../../idempotency/hook.ts";
import { limits } from "../../limits.ts";
import {
  BalanceData,
  ClientData,
  ClientListData,
  ClientListQuery,
  ClientParams,
  ClientStatusBody,
  ClientStatusData,
  ClientTransferBody,
  type ClientTransferBodyType,
  ClientTransferData,
  ClientTransferListData,
  ClientTransferListQuery,
  type ClientTransferListQueryType,
  type CreateClientBody,
  createClientBody,
  SubclientData,
} from "./schemas.ts";
import { createSubclient, getBalance, getClient, listSubclients, setClientStatus } from "./service.ts";
import { listClientTransfers, transferBetweenClients } from "./transfers.ts";

const createSubclientRoute: Operation = (app, ctx) => {
  app.post<{ Body: CreateClientBody }>(
    "/v1/clients",
    {
      config: { idempotent: true, rateLimited: true },
      schema: {
        tags: ["clients"],
        operationId: "createSubclient",
        summary: "Create a sub-client with its own API key (contract 4.4)",
        description:
          "The new client is a child of the caller, funded with `available` from the caller's main balance in the same transaction; the caller's balance may not fall below its minimum balance (5102). Log in as the new client with `api_client.api_key` and the `api_key_password` you sent (never returned). Honours Idempotency-Key.",
        security: bearerAuth,
        body: createClientBody(ctx.config.apiKeyPasswordMinLength),
        response: responses(SubclientData),
      },
    },
    async (request, reply) =>
      sendResult(
        reply,
        await createSubclient(
          ctx.db,
          request.caller,
          request.body,
          request.idempotency,
          ctx.config.clabeBankPrefix,
        ),
      ),
  );
};

const createClientTransferRoute: Operation = (app, ctx) => {
  app.post<{ Body: ClientTransferBodyType }>(
    "/v1/clients/transfers",
    {
      config: { idempotent: true, rateLimited: true },
      // A client id in either letter case is the same client, so the same request under its
      // Idempotency-Key (fingerprinted after validation, over the body as it then is).
      preValidation: async (request) => {
        const body = request.body as Record<string, unknown> | null;
        if (!body || typeof body !== "object") return;
        for (const field of ["from_client_id", "to_client_id"]) {
          const value = body[field];
          if (typeof value === "string") body[field] = value.toLowerCase();
        }
      },
      schema: {
        tags: ["clients"],
        operationId: "createClientTransfer",
        summary: "Move money between the main balances of two clients of your subtree",
        description:
          "Top up a sub-client from your balance, take money back from one (a disabled one too), or move it between two clients below you: one balanced ledger entry. Both sides are you or clients below you (3101 otherwise) and differ (1000); the paying client keeps at least its minimum balance (5105); the receiving client may not be disabled or below a disabled client (5106). Emits client.transfer to you. Honours Idempotency-Key.",
        security: bearerAuth,
        body: ClientTransferBody,
        response: responses(ClientTransferData),
      },
    },
    async (request, reply) =>
      sendResult(
        reply,
        await transferBetweenClients(ctx.db, request.caller, request.body, request.idempotency),
      ),
  );
};

const listClientTransfersRoute: Operation = (app, ctx) => {
  app.get<{ Querystring: ClientTransferListQueryType }>(
    "/v1/clients/transfers",
    {
      schema: {
        tags: ["clients"],
        operationId: "listClientTransfers",
        summary: "Transfers that paid from or into a main balance of your subtree, newest first",
        description:
          "Every POST /v1/clients/transfers that moved your balance or a sub-client's, including those your parent made on yours (a client outside your subtree shows as null). Filter by client_id (either side) and creation time; page with cursor = the previous next_cursor, with the same filters and per_page.",
        security: bearerAuth,
        querystring: ClientTransferListQuery,
        response: responses(ClientTransferListData),
      },
    },
    async (request) => {
      const { per_page, ...filters } = request.query;
      return ok(
        await listClientTransfers(ctx.db, request.caller, {
          ...filters,
          perPage: per_page ?? limits.pageSizeDefault,
        }),
      );
    },
  );
};

const getBalanceRoute: Operation = (app, ctx) => {
  app.get(
    "/v1/clients/balance",
    {
      schema: {
        tags: ["clients"],
        operationId: "getBalance",
        summary: "Your main balance",
        security: bearerAuth,
        response: responses(BalanceData),
      },
    },
    async (request) => ok(await getBalance(ctx.db, request.caller)),
  );
};

const listSubclientsRoute: Operation = (app, ctx) => {
  app.get<{ Querystring: Static<typeof ClientListQuery> }>(
    "/v1/clients",
    {
      schema: {
        tags: ["clients"],
        operationId: "listSubclients",
        summary: "Your direct sub-clients, oldest first",
        security: bearerAuth,
        querystring: ClientListQuery,
        response: responses(ClientListData),
      },
    },
    async (request) => {
      const { page, perPage } = pageOf(request.query, { cursor: false });
      return ok(await listSubclients(ctx.db, request.caller, page, perPage));
    },
  );
};

const getClientRoute: Operation = (app, ctx) => {
  app.get<{ Params: Static<typeof ClientParams> }>(
    "/v1/clients/:id",
    {
      schema: {
        tags: ["clients"],
        operationId: "getClient",
        summary: "One client: yourself or any client of your subtree",
        security: bearerAuth,
        params: ClientParams,
        response: responses(ClientData),
      },
    },
    async (request) => ok(await getClient(ctx.db, request.caller, request.params.id)),
  );
};

const updateClientStatusRoute: Operation = (app, ctx) => {
  app.put<{ Params: Static<typeof ClientParams>; Body: Static<typeof ClientStatusBody> }>(
    "/v1/clients/:id/status",
    {
      schema: {
        tags: ["clients"],
        operationId: "updateClientStatus",
        summary: "Disable (or enable again) a client of your subtree",
        description:
          "DISABLED: the client and every client below it answer 2006 at login and on every call (within EMISOR_AUTH_CACHE_SECONDS in every process); they receive no money (incoming SPEI to their CLABEs is returned with cause 02, a payment onto their cards is 5405, a transfer between clients to them 5106), while their ancestors can still take it out (POST /v1/cards/unload, POST /v1/clients/transfers). Not your own status (5104). Only the client that disabled it, or one above that one, enables it again (5107). Emits client.status_changed to the client's parent when the status changes.",
        security: bearerAuth,
        params: ClientParams,
        body: ClientStatusBody,
        response: responses(ClientStatusData),
      },
    },
    async (request) =>
      ok(
        await setClientStatus(ctx.db, request.caller, request.params.id, request.body.status, () =>
          ctx.auth.invalidateAll(),
        ),
      ),
  );
};

/** Sub-clients (contract 4.4) and the reads integrators need beside it: balance, list, one client. */
export function registerClientRoutes(app: FastifyInstance, ctx: AppContext): void {
  for (const operation of [
    createSubclientRoute,
    createClientTransferRoute,
    listClientTransfersRoute,
    getBalanceRoute,
    listSubclientsRoute,
    getClientRoute,
    updateClientStatusRoute,
  ])
    operation(app, ctx);
}
