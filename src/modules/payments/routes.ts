import type { FastifyInstance } from "fastify";
import type { Static } from "typebox";
import type { AppContext } from "../../context.ts";
import type { Operation } from "../../http/operation.ts";
import { bearerAuth, responses } from "../../http/schemas.ts";
import { sendResult } from "../../idempotency/hook.ts";
import { PaymentBody, PaymentData } from "./schemas.ts";
import { payCard } from "./service.ts";

const createPaymentRoute: Operation = (app, ctx) => {
  app.post<{ Body: Static<typeof PaymentBody> }>(
    "/v1/cards/payment",
    {
      // A payment's key is checked in its batch, under the payer's lock: a lookup before it would
      // add a statement to every payment, on the hottest path. The card number may be ciphered:
      // the service completes the key's fingerprint (IdempotencyDraft).
      config: { idempotent: true, cipheredFields: ["card_number"], rateLimited: true },
      schema: {
        tags: ["payments"],
        operationId: "createPayment",
        summary: "Pay an amount onto a card from your main balance (contract 4.6)",
        description:
          "The card must be NEED_ACTIVATION or ACTIVE and in your subtree; a card of a disabled sub-client (or one below a disabled client) is 5405. Concurrent payments of one client are applied in batches; each is decided in arrival order against the balance.",
        security: bearerAuth,
        body: PaymentBody,
        response: responses(PaymentData),
      },
    },
    async (request, reply) =>
      sendResult(reply, await payCard(ctx, request.caller, request.body, request.idempotencyDraft)),
  );
};

export function registerPaymentRoutes(app: FastifyInstance, ctx: AppContext): void {
  for (const operation of [createPaymentRoute]) operation(app, ctx);
}
