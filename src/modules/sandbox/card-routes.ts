import type { FastifyInstance } from "fastify";
import { type Static, type TSchema, Type } from "typebox";
import type { AppContext } from "../../context.ts";
import { ok } from "../../http/envelope.ts";
import type { Operation } from "../../http/operation.ts";
import { bearerAuth, responses } from "../../http/schemas.ts";
import type { CardMessage } from "../purchases/message.ts";
import {
  AuthorizationParams,
  MessageAnswerData,
  SandboxAmountBody,
  SandboxAuthorizationBody,
  SandboxOptionalAmountBody,
  SandboxPostBody,
} from "../purchases/schemas.ts";
import { heldAmount, type SimulatedPurchase, simulateCardMessage } from "./cards.ts";

const EmptyBody = Type.Object({}, { additionalProperties: false });

/** One simulator route: a body (and, under /authorizations/{id}, the authorization) to a message. */
function simulatorRoute(spec: {
  path: string;
  operationId: string;
  summary: string;
  type: CardMessage["type"];
  body: TSchema;
  withId?: boolean;
  clearAll?: boolean;
}): Operation {
  return (app, ctx) => {
    app.post<{ Body: SimulatedPurchase; Params: Static<typeof AuthorizationParams> }>(
      spec.path,
      {
        config: { idempotent: true, rateLimited: true },
        schema: {
          tags: ["sandbox"],
          operationId: spec.operationId,
          summary: `${spec.summary} (sandbox only)`,
          description:
            "Runs the message through the path of POST /v1/rails/cards/messages and answers what it answered (amounts in centavos). An Idempotency-Key is the message's id: a retry answers the first answer.",
          security: bearerAuth,
          ...(spec.withId ? { params: AuthorizationParams } : {}),
          body: spec.body,
          response: responses(MessageAnswerData),
        },
      },
      async (request, reply) => {
        const input: SimulatedPurchase = { ...(request.body ?? {}) };
        if (spec.withId) input.authorization_id = request.params.id;
        if (spec.clearAll && input.amount === undefined && input.authorization_id)
          input.amount = await heldAmount(ctx, request.caller, input.authorization_id);
        const { answer, replayed } = await simulateCardMessage(
          ctx,
          request.caller,
          spec.type,
          input,
          request.idempotency,
        );
        // As the documented Idempotency-Key promises, and as the processor's route marks a repeat.
        if (replayed) reply.header("idempotent-replayed", "true");
        return ok(answer);
      },
    );
  };
}

export const cardSimulatorRoutes: Operation[] = [
  simulatorRoute({
    path: "/v1/sandbox/cards/authorizations",
    operationId: "simulateCardAuthorization",
    summary: "A purchase asking for authorization (0100)",
    type: "AUTHORIZATION",
    body: SandboxAuthorizationBody,
  }),
  simulatorRoute({
    path: "/v1/sandbox/cards/authorizations/:id/advice",
    operationId: "simulateCardAuthorizationAdvice",
    summary: "An advice setting the authorization's hold to amount (0120)",
    type: "AUTHORIZATION_ADVICE",
    body: SandboxAmountBody,
    withId: true,
  }),
  simulatorRoute({
    path: "/v1/sandbox/cards/authorizations/:id/reverse",
    operationId: "simulateCardAuthorizationReversal",
    summary: "A reversal releasing amount of the hold, or all of it (0400)",
    type: "AUTHORIZATION_REVERSAL",
    body: SandboxOptionalAmountBody,
    withId: true,
  }),
  simulatorRoute({
    path: "/v1/sandbox/cards/authorizations/:id/clear",
    operationId: "simulateCardClearing",
    summary: "A clearing of amount, or of all that is held; repeatable with is_final false",
    type: "CLEARING",
    body: SandboxOptionalAmountBody,
    withId: true,
    clearAll: true,
  }),
  simulatorRoute({
    path: "/v1/sandbox/cards/authorizations/:id/expire",
    operationId: "simulateCardAuthorizationExpiry",
    summary: "The hold expires now, as the expiry worker would release it",
    type: "AUTHORIZATION_EXPIRY",
    body: EmptyBody,
    withId: true,
  }),
  simulatorRoute({
    path: "/v1/sandbox/cards/force_posts",
    operationId: "simulateCardForcePost",
    summary: "A clearing that names no authorization (force post)",
    type: "CLEARING",
    body: Type.Omit(SandboxPostBody, ["authorization_id"], { additionalProperties: false }),
  }),
  simulatorRoute({
    path: "/v1/sandbox/cards/refunds",
    operationId: "simulateCardRefund",
    summary: "A refund (RETURN) credited to the card",
    type: "RETURN",
    body: SandboxPostBody,
  }),
];

export function registerCardSimulatorRoutes(app: FastifyInstance, ctx: AppContext): void {
  for (const operation of cardSimulatorRoutes) operation(app, ctx);
}
