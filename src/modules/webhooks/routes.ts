import type { FastifyInstance } from "fastify";
import type { Static } from "typebox";
import type { AppContext } from "../../context.ts";
import { noStore, ok } from "../../http/envelope.ts";
import type { Operation } from "../../http/operation.ts";
import { bearerAuth, NoStoreHeader, pageOf, responses } from "../../http/schemas.ts";
import { sendResult } from "../../idempotency/hook.ts";
import { limits } from "../../limits.ts";
import {
  CreatedWebhookData,
  CreateWebhookBody,
  DeletedWebhookData,
  ListWebhooksQuery,
  ReplayBody,
  ReplayData,
  RotatedSecretData,
  TestEventData,
  WebhookData,
  WebhookListData,
  WebhookParams,
  WebhookStateData,
} from "./schemas.ts";
import * as service from "./service.ts";

type ById = { Params: Static<typeof WebhookParams> };
const common = { tags: ["webhooks"], security: bearerAuth };

function webhookDeps(ctx: AppContext): service.WebhookDeps {
  return { db: ctx.db, vaultKey: ctx.keys.vault, sandbox: ctx.config.sandbox };
}

const createWebhookRoute: Operation = (app, ctx) => {
  app.post<{ Body: Static<typeof CreateWebhookBody> }>(
    "/v1/webhooks",
    {
      config: { idempotent: true },
      schema: {
        ...common,
        operationId: "createWebhook",
        summary: "Register a webhook endpoint",
        description: "The response holds the signing secret; it is never shown again.",
        body: CreateWebhookBody,
        response: responses(CreatedWebhookData, { headers: NoStoreHeader }),
      },
    },
    async (request, reply) =>
      sendResult(
        noStore(reply),
        await service.createWebhook(webhookDeps(ctx), request.caller, request.body, request.idempotency),
      ),
  );
};

const listWebhooksRoute: Operation = (app, ctx) => {
  app.get<{ Querystring: Static<typeof ListWebhooksQuery> }>(
    "/v1/webhooks",
    {
      schema: {
        ...common,
        operationId: "listWebhooks",
        summary: "List your webhook endpoints and your sub-clients'",
        querystring: ListWebhooksQuery,
        response: responses(WebhookListData),
      },
    },
    async (request) => {
      const { page, perPage } = pageOf(request.query, { cursor: false });
      return ok(
        await service.listWebhooks(ctx.db, request.caller, {
          client_id: request.query.client_id,
          page,
          per_page: perPage,
        }),
      );
    },
  );
};

const getWebhookRoute: Operation = (app, ctx) => {
  app.get<ById>(
    "/v1/webhooks/:id",
    {
      schema: {
        ...common,
        operationId: "getWebhook",
        summary: "A webhook endpoint's state and its latest deliveries",
        params: WebhookParams,
        response: responses(WebhookStateData),
      },
    },
    async (request) => ok(await service.getWebhook(ctx.db, request.caller, request.params.id)),
  );
};

const deleteWebhookRoute: Operation = (app, ctx) => {
  app.delete<ById>(
    "/v1/webhooks/:id",
    {
      schema: {
        ...common,
        operationId: "deleteWebhook",
        summary: "Delete a webhook endpoint",
        params: WebhookParams,
        response: responses(DeletedWebhookData),
      },
    },
    async (request) => ok(await service.deleteWebhook(ctx.db, request.caller, request.params.id)),
  );
};

const enableWebhookRoute: Operation = (app, ctx) => {
  app.post<ById>(
    "/v1/webhooks/:id/enable",
    {
      schema: {
        ...common,
        operationId: "enableWebhook",
        summary: "Enable a disabled webhook endpoint",
        params: WebhookParams,
        response: responses(WebhookData),
      },
    },
    async (request) => ok(await service.enableWebhook(ctx.db, request.caller, request.params.id)),
  );
};

const rotateWebhookSecretRoute: Operation = (app, ctx) => {
  app.post<ById>(
    "/v1/webhooks/:id/rotate_secret",
    {
      config: { idempotent: true },
      schema: {
        ...common,
        operationId: "rotateWebhookSecret",
        summary: "Replace the signing secret",
        description: `The new secret is shown once; the one it replaces also signs for ${limits.webhookSecretRotationGraceHours} hours (and those replaced before keep their own expiry). Idempotent with Idempotency-Key: a retry replays the rotation without its secret instead of rotating again.`,
        params: WebhookParams,
        response: responses(RotatedSecretData, { headers: NoStoreHeader }),
      },
    },
    async (request, reply) =>
      sendResult(
        noStore(reply),
        await service.rotateWebhookSecret(
          webhookDeps(ctx),
          request.caller,
          request.params.id,
          request.idempotency,
        ),
      ),
  );
};

const testWebhookRoute: Operation = (app, ctx) => {
  app.post<ById>(
    "/v1/webhooks/:id/test",
    {
      config: { idempotent: true },
      schema: {
        ...common,
        operationId: "testWebhook",
        summary: "Send a webhook.test event to this endpoint",
        params: WebhookParams,
        response: responses(TestEventData),
      },
    },
    async (request, reply) =>
      sendResult(
        reply,
        await service.sendTestEvent(ctx.db, request.caller, request.params.id, request.idempotency),
      ),
  );
};

const replayWebhookEventRoute: Operation = (app, ctx) => {
  app.post<ById & { Body: Static<typeof ReplayBody> }>(
    "/v1/webhooks/:id/replay",
    {
      config: { idempotent: true },
      schema: {
        ...common,
        operationId: "replayWebhookEvent",
        summary: "Send an event to this endpoint again, with its original webhook-id",
        params: WebhookParams,
        body: ReplayBody,
        response: responses(ReplayData),
      },
    },
    async (request, reply) =>
      sendResult(
        reply,
        await service.replayEvent(
          ctx.db,
          request.caller,
          request.params.id,
          request.body.event_id,
          request.idempotency,
        ),
      ),
  );
};

/** /v1/webhooks: register, list, inspect, delete, enable, rotate, test, and replay to endpoints. */
export function registerWebhookRoutes(app: FastifyInstance, ctx: AppContext): void {
  for (const operation of [
    createWebhookRoute,
    listWebhooksRoute,
    getWebhookRoute,
    deleteWebhookRoute,
    enableWebhookRoute,
    rotateWebhookSecretRoute,
    testWebhookRoute,
    replayWebhookEventRoute,
  ])
    operation(app, ctx);
}
