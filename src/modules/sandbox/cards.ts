import { createHash, randomUUID } from "node:crypto";
import type { AppContext } from "../../context.ts";
import { AppError, errors } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import type { IdempotencyScope } from "../../idempotency/store.ts";
import { parsePesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import { expirationOf } from "../cards/expiry.ts";
import { cardOrThrow } from "../cards/service.ts";
import type { CardMessage } from "../purchases/message.ts";
import * as purchases from "../purchases/repository.ts";
import type { MerchantType } from "../purchases/schemas.ts";
import type { Processed } from "../purchases/service.ts";

/**
 * The network simulator (as Lithic's /v1/simulate/*): each call builds the message the processor
 * would send and runs it through the very path of POST /v1/rails/cards/messages, answering what
 * that answered. An Idempotency-Key becomes the message's id (per API key), so a retry with the
 * same key answers the first answer and moves nothing, as a network's repeated message does.
 */
function messageId(idempotency: IdempotencyScope | undefined): string {
  if (!idempotency) return `sandbox-${randomUUID()}`;
  const digest = createHash("sha256").update(`${idempotency.apiKeyId}\n${idempotency.key}`).digest("hex");
  return `sandbox-${digest.slice(0, 48)}`;
}

function pesos(amount: number | undefined, field = "amount"): bigint | undefined {
  return amount === undefined ? undefined : parsePesos(amount, field, { maxCents: limits.amountCentsMax });
}

export interface SimulatedPurchase {
  card_id?: string | undefined;
  authorization_id?: string | undefined;
  amount?: number | undefined;
  merchant?: MerchantType | undefined;
  channel?: string | undefined;
  partial_allowed?: boolean | undefined;
  is_final?: boolean | undefined;
  expiration?: string | undefined;
  cvv2?: string | undefined;
  pin?: string | undefined;
}

/** Runs one simulated message, after checking that its card or authorization is the caller's. */
export async function simulateCardMessage(
  ctx: AppContext,
  caller: Caller,
  type: CardMessage["type"],
  input: SimulatedPurchase,
  idempotency: IdempotencyScope | undefined,
): Promise<Processed> {
  const card = input.card_id ? await cardOrThrow(ctx.db, caller, { id: input.card_id }) : undefined;
  if (input.authorization_id) {
    const found = await purchases.findAuthorizationInScope(ctx.db, caller.clientId, input.authorization_id);
    if (!found) throw new AppError(errors.authorizationNotFound);
  }
  const amountCents = pesos(input.amount);
  const message: CardMessage = {
    messageId: messageId(idempotency),
    type,
    card: input.card_id ? { id: input.card_id.toLowerCase() } : undefined,
    authorizationId: input.authorization_id?.toLowerCase(),
    amountCents,
    currency: "484",
    merchantAmount: amountCents ?? 0n,
    merchant: input.merchant ? { country: "MEX", ...input.merchant } : undefined,
    channel: input.channel ?? "POS_CHIP",
    partialAllowed: input.partial_allowed ?? false,
    isFinal: input.is_final ?? true,
    // As a network gives it: the cardholder's expiry card not present, unless the call gives one.
    expiration:
      input.expiration ??
      (card && ["ECOMMERCE", "MANUAL"].includes(input.channel ?? "")
        ? expirationOf(card.expires_on).replace("/", "")
        : undefined),
    cvv2: input.cvv2,
    pin: input.pin,
  };
  return ctx.cardMessages.process(message);
}

/** A clearing with no amount settles all of what the authorization holds now. */
export async function heldAmount(ctx: AppContext, caller: Caller, authorizationId: string): Promise<number> {
  const found = await purchases.findAuthorizationInScope(ctx.db, caller.clientId, authorizationId);
  if (!found) throw new AppError(errors.authorizationNotFound);
  return Number(found.held_cents) / 100;
}
