import type { FastifyInstance } from "fastify";
import type { AppContext } from "../../context.ts";
import { noStore, ok } from "../../http/envelope.ts";
import type { Operation } from "../../http/operation.ts";
import { bearerAuth, NoStoreHeader, responses } from "../../http/schemas.ts";
import { sendResult } from "../../idempotency/hook.ts";
import { limits } from "../../limits.ts";
import {
  DeletedEndpointData,
  EndpointData,
  PutEndpointBody,
  type PutEndpointBodyType,
  PutEndpointData,
  RotatedEndpointSecretData,
} from "./schemas.ts";
import * as service from "./service.ts";

const path = "/v1/clients/authorization_endpoint";
const common = { tags: ["authorization decisions"], security: bearerAuth };

function decisionDeps(ctx: AppContext): service.DecisionDeps {
  return { db: ctx.db, vaultKey: ctx.keys.vault, sandbox: ctx.config.sandbox };
}

const putAuthorizationEndpointRoute: Operation = (app, ctx) => {
  app.put<{ Body: PutEndpointBodyType }>(
    path,
    {
      config: { idempotent: true },
      schema: {
        ...common,
        operationId: "putAuthorizationEndpoint",
        summary: "Register or replace your authorization decision endpoint",
        description:
          "Emisor POSTs each authorization of your cards and your sub-clients' (those without their own endpoint) that passed its own checks, and waits timeout_ms for your signed answer (docs/guides/authorization-decisions.md). The first registration answers the signing secret, never shown again; a replacement keeps it (secret null). Fields left out take their defaults. Honours Idempotency-Key.",
        body: PutEndpointBody,
        response: responses(PutEndpointData, { headers: NoStoreHeader }),
      },
    },
    async (request, reply) =>
      sendResult(
        noStore(reply),
        await service.putAuthorizationEndpoint(
          decisionDeps(ctx),
          request.caller,
          request.body,
          request.idempotency,
        ),
      ),
  );
};

const getAuthorizationEndpointRoute: Operation = (app, ctx) => {
  app.get(
    path,
    {
      schema: {
        ...common,
        operationId: "getAuthorizationEndpoint",
        summary: "The endpoint that decides your authorizations: yours, or the one you inherit",
        description:
          "Your own endpoint, or else your nearest ancestor's (inherited: true, its url not shown); 3810 when there is none. Never the secret.",
        response: responses(EndpointData),
      },
    },
    async (request) => ok(await service.getAuthorizationEndpoint(ctx.db, request.caller)),
  );
};

const deleteAuthorizationEndpointRoute: Operation = (app, ctx) => {
  app.delete(
    path,
    {
      schema: {
        ...common,
        operationId: "deleteAuthorizationEndpoint",
        summary: "Remove your own authorization decision endpoint",
        description:
          "From then on your authorizations are decided by the endpoint you inherit, if an ancestor has one. 3811 when you have none of your own.",
        response: responses(DeletedEndpointData),
      },
    },
    async (request) => ok(await service.deleteAuthorizationEndpoint(ctx.db, request.caller)),
  );
};

const rotateAuthorizationEndpointSecretRoute: Operation = (app, ctx) => {
  app.post(
    `${path}/rotate_secret`,
    {
      config: { idempotent: true },
      schema: {
        ...common,
        operationId: "rotateAuthorizationEndpointSecret",
        summary: "Replace your decision endpoint's signing secret",
        description: `The new secret is shown once; the one it replaces also signs every request, and is accepted on your answers, for ${limits.authorizationEndpointSecretGraceHours} hours. 3811 when you have no endpoint of your own. Idempotent with Idempotency-Key: a retry replays the rotation without its secret.`,
        response: responses(RotatedEndpointSecretData, { headers: NoStoreHeader }),
      },
    },
    async (request, reply) =>
      sendResult(
        noStore(reply),
        await service.rotateAuthorizationEndpointSecret(
          decisionDeps(ctx),
          request.caller,
          request.idempotency,
        ),
      ),
  );
};

/** /v1/clients/authorization_endpoint: the caller's real-time decision endpoint. */
export function registerDecisionRoutes(app: FastifyInstance, ctx: AppContext): void {
  for (const operation of [
    putAuthorizationEndpointRoute,
    getAuthorizationEndpointRoute,
    deleteAuthorizationEndpointRoute,
    rotateAuthorizationEndpointSecretRoute,
  ])
    operation(app, ctx);
}
