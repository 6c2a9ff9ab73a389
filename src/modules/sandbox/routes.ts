import type { FastifyInstance } from "fastify";
import { type Static, Type } from "typebox";
import type { AppContext } from "../../context.ts";
import type { Operation } from "../../http/operation.ts";
import { bearerAuth, Pesos, responses } from "../../http/schemas.ts";
import { sendResult } from "../../idempotency/hook.ts";
import { parsePesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import { forceReturn } from "../transfers/outgoing.ts";
import {
  AbonoResultData,
  abonoAmountCents,
  OrderParams,
  SandboxIncomingBody,
  type SandboxIncomingBodyType,
  SandboxReturnBody,
  type SandboxReturnBodyType,
  SpeiOrderData,
} from "../transfers/schemas.ts";
import { simulateIncoming } from "../transfers/service.ts";
import { registerCardSimulatorRoutes } from "./card-routes.ts";
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
const simulateFundingRoute: Operation = (app, ctx) => {
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
};

const simulateIncomingTransferRoute: Operation = (app, ctx) => {
  app.post<{ Body: SandboxIncomingBodyType }>(
    "/v1/sandbox/spei/incoming",
    {
      config: { idempotent: true, rateLimited: true },
      schema: {
        tags: ["sandbox"],
        operationId: "simulateIncomingTransfer",
        summary: "Simulate an incoming SPEI transfer to one of your CLABEs (sandbox only)",
        security: bearerAuth,
        body: SandboxIncomingBody,
        response: responses(AbonoResultData),
      },
    },
    async (request, reply) => {
      const b = request.body;
      const result = await simulateIncoming(
        ctx.db,
        request.caller,
        {
          clabe: b.clabe,
          amountCents: abonoAmountCents(b.amount, "amount"),
          trackingKey: b.tracking_key?.toUpperCase(),
          operationDate: b.operation_date,
          payerName: b.payer_name,
          payerAccount: b.payer_account,
          payerInstitution: b.payer_institution,
          payerRfcCurp: b.payer_rfc_curp,
          paymentConcept: b.payment_concept,
          numericReference: b.numeric_reference,
        },
        request.idempotency,
      );
      return sendResult(reply, result);
    },
  );
};

const simulateTransferReturnRoute: Operation = (app, ctx) => {
  app.post<{ Params: Static<typeof OrderParams>; Body: SandboxReturnBodyType }>(
    "/v1/sandbox/spei/orders/:id/return",
    {
      config: { idempotent: true, rateLimited: true },
      schema: {
        tags: ["sandbox"],
        operationId: "simulateTransferReturn",
        summary: "Force the return (DEVUELTA) of a transfer out (sandbox only)",
        description: "The payer gets amount, commission and IVA back. Body {} or {cause: '03'}.",
        security: bearerAuth,
        params: OrderParams,
        body: SandboxReturnBody,
        response: responses(SpeiOrderData),
      },
    },
    async (request, reply) => {
      const cause = request.body.cause ?? "01";
      const result = await forceReturn(
        ctx.db,
        ctx.rails.spei,
        request.caller,
        request.params.id,
        cause,
        request.idempotency,
      );
      return sendResult(reply, result);
    },
  );
};

/**
 * Sandbox-only routes (EMISOR_SANDBOX=true); in production they do not exist (404). They drive
 * what a bank, a rail or a card network would do: fund the caller's main balance, send an incoming
 * SPEI transfer to a CLABE, have the receiving bank return a transfer out, and send the card
 * network's messages (card-routes.ts). Each honours Idempotency-Key.
 */
export function registerSandboxRoutes(app: FastifyInstance, ctx: AppContext): void {
  if (!ctx.config.sandbox) return;
  for (const operation of [simulateFundingRoute, simulateIncomingTransferRoute, simulateTransferReturnRoute])
    operation(app, ctx);
  registerCardSimulatorRoutes(app, ctx);
}
