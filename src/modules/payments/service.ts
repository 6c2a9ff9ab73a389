import type { Static } from "typebox";
import type { AppContext } from "../../context.ts";
import {
  findStoredResponse,
  type IdempotencyDraft,
  type IdempotencyScope,
  type IdempotentResult,
} from "../../db/idempotency.ts";
import { AppError, errors } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import { parsePesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import type { CardCache } from "../cards/card-cache.ts";
import { type CardRef, cardRefName, parseCardNumber } from "../cards/card-number.ts";
import { isExpired } from "../cards/expiry.ts";
import { effectiveStatusOf } from "../clients/repository.ts";
import type { PaymentBatcher, PaymentRequest } from "./batcher.ts";
import type { PaymentBody } from "./schemas.ts";

/**
 * Contract 4.6: the caller's main balance pays `amount` onto a card of its subtree. The card is
 * resolved here (from the per-process cache after the first time), outside any transaction; the
 * batcher checks its status under lock and applies the money movement.
 */
export async function payCard(
  ctx: AppContext,
  cards: CardCache,
  batcher: PaymentBatcher,
  caller: Caller,
  body: Static<typeof PaymentBody>,
  draft: IdempotencyDraft | undefined,
): Promise<IdempotentResult> {
  let request: PaymentRequest;
  let idempotency: IdempotencyScope | undefined;
  try {
    const amountCents = parsePesos(body.amount, "amount", { maxCents: limits.amountCentsMax });
    const ref = await parseCardNumber(ctx, body.card_number);
    idempotency = draft?.complete({ card_number: cardRefName(ref) });
    request = await paymentRequest(ctx, cards, caller, body, { amountCents, ref, idempotency });
  } catch (error) {
    // The key is checked in the batch; a request refused before it asks the store, so a used key
    // still answers its first response, or 409 for another body.
    const stored = idempotency ? await findStoredResponse(ctx.db, idempotency) : undefined;
    if (stored) return stored;
    throw error;
  }
  return batcher.submit(request);
}

/** The payment as the batcher takes it: the amount checked, the card resolved in the caller's scope. */
async function paymentRequest(
  ctx: AppContext,
  cards: CardCache,
  caller: Caller,
  body: Static<typeof PaymentBody>,
  parsed: { amountCents: bigint; ref: CardRef; idempotency: IdempotencyScope | undefined },
): Promise<PaymentRequest> {
  const { amountCents, idempotency } = parsed;
  const card = await cards.find(ctx.db, caller.clientId, parsed.ref);
  if (!card) throw new AppError(errors.cardNotFound);
  // Its expiry date never changes, so the cached card answers it.
  if (isExpired(card.expires_on)) throw new AppError(errors.cardExpired);
  // A disabled client receives no money (incoming SPEI is returned, a transfer between clients
  // refused): a sub-client's card is checked as the caller's own status is at authentication, when
  // the request starts. The caller's own cards need no query: its status was checked.
  if (card.client_id !== caller.clientId && (await effectiveStatusOf(ctx.db, card.client_id)) !== "ACTIVE")
    throw new AppError(errors.cardClientDisabled);
  return {
    payerId: caller.clientId,
    apiKeyId: caller.apiKeyId,
    card,
    amountCents,
    description: body.payment_description,
    latitude: body.latitude,
    longitude: body.longitude,
    idempotency,
  };
}
