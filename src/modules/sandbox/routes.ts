import type { FastifyInstance } from "fastify";
import { type Static, Type } from "typebox";
import type { AppContext } from "../../context.ts";
import { bearerAuth, Pesos, responses } from "../../http/schemas.ts";
import { sendResult } from "../../idempotency/hook.ts";
import { parsePesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import { fundCaller } from "./service.ts";

const FundingBody = Type.Object(
  { amount: Pesos("Amount to add to the caller's main balance, MXN", limits.fundingCentsMax) },
  { additionalProperties: false },
);
const FundingData = Type.Object({
  funding: Type.Object({
    id: Type.String({ format: "uuid", description: "The ledger entry" }),
    amount: Type.Number(),
    available: Type.Number({ description: "Main balance after the funding" }),
  }),
});

/**
 * Sandbox-only routes (EMISOR_SANDBOX=true); in production they do not exist (404).
 * POST /v1/sandbox/funding adds money to the caller's main balance from the sandbox funding
 * account, honouring Idempotency-Key.
 */
export function registerSandboxRoutes(app: FastifyInstance, ctx: AppContext): void {
  if (!ctx.config.sandbox) return;
  app.post<{ Body: Static<typeof FundingBody> }>(
    "/v1/sandbox/funding",
    {
      config: { idempotent: true, rateLimited: true },
      schema: {
        tags: ["sandbox"],
        operationId: "simulateFunding",
        summary: "Fund your main balance (sandbox only)",
        security: bearerAuth,
        body: FundingBody,
        response: responses(FundingData),
      },
    },
    async (request, reply) => {
      const amountCents = parsePesos(request.body.amount, "amount", { maxCents: limits.fundingCentsMax });
      return sendResult(reply, await fundCaller(ctx.db, request.caller, amountCents, request.idempotency));
    },
  );
}
