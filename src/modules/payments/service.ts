import type { Static } from "typebox";
import type { AppContext } from "../../context.ts";
import { AppError, errors } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import type { IdempotentResult } from "../../idempotency/reply.ts";
import { checkBeforeWork } from "../../idempotency/run.ts";
import type { IdempotencyDraft, IdempotencyScope } from "../../idempotency/store.ts";
import { parsePesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import { type CardRef, cardRefName, parseCardNumber } from "../cards/card-number.ts";
import { isExpired } from "../cards/expiry.ts";
import { effectiveStatusOf } from "../clients/repository.ts";
import type { PaymentRequest } from "./batcher.ts";
import type { PaymentBody } from "./schemas.ts";

/**
 * Contract 4.6: the caller's main balance pays `amount` onto a card of its subtree. The card is
 * resolved here (from the per-process cache after the first time), outside any transaction; the
 * batcher checks its status under lock and applies the money movement.
 */
export async function payCard(
  ctx: AppContext,
  caller: Caller,
  body: Static<typeof PaymentBody>,
  draft: IdempotencyDraft | undefined,
): Promise<IdempotentResult> {
  // Validation (1xxx), not stored under the key: a retry evaluates the request again.
  const amountCents = parsePesos(body.amount, "amount", { maxCents: limits.amountCentsMax });
  const ref = await parseCardNumber(ctx, body.card_number);
  const idempotency = draft?.complete({ card_number: cardRefName(ref) });
  // The key is checked in the batch. A request refused before it (no such card, expired, a
  // disabled client's) stores the refusal as the key's answer, as the batch stores its own: a
  // client enabled again later must not see an attempt it was refused take effect. A used key
  // still answers its first response, or 409 for another body.
  const resolved = await checkBeforeWork(ctx.db, idempotency, () =>
    paymentRequest(ctx, caller, body, { amountCents, ref, idempotency }),
  );
  if ("stored" in resolved) return resolved.stored;
  return ctx.paymentBatcher.submit(resolved.value);
}

/** The payment as the batcher takes it: the amount checked, the card resolved in the caller's scope. */
async function paymentRequest(
  ctx: AppContext,
  caller: Caller,
  body: Static<typeof PaymentBody>,
  parsed: { amountCents: bigint; ref: CardRef; idempotency: IdempotencyScope | undefined },
): Promise<PaymentRequest> {
  const { amountCents, idempotency } = parsed;
  const card = await ctx.cardCache.find(ctx.db, caller.clientId, parsed.ref);
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
