import type { Static } from "typebox";
import { Type } from "typebox";
import type { AppContext } from "../../context.ts";
import { AppError, errors } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import { OrNull, Pesos } from "../../http/schemas.ts";
import { type IdempotentResult, okReply } from "../../idempotency/reply.ts";
import { checkBeforeWork, runIdempotent } from "../../idempotency/run.ts";
import { completeDraft, type IdempotencyDraft, type IdempotencyScope } from "../../idempotency/store.ts";
import { parsePesos, toPesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import { type CardRef, cardRefName, maskedCardNumber, parseCardNumber } from "../cards/card-number.ts";
import { pinVerificationValue, readPin, verifyPin } from "../cards/pin.ts";
import { findSpendingCard, type SpendingCard } from "../cards/repository.ts";
import { CardNumber } from "../cards/schemas.ts";
import { activeOrThrow, lockActiveCard } from "../cards/service.ts";
import { outboxRow } from "../events/outbox.ts";
import { type Beneficiary, BeneficiaryProperties, validateBeneficiary } from "./beneficiary.ts";
import {
  createSpeiOrder,
  type PreparedSpeiOrder,
  prepareSpeiOrder,
  type SpeiOrder,
  type SpeiOrderInput,
  speiOrderOf,
} from "./outgoing.ts";

/**
 * Contract 4.10: an interbank transfer paid by a card. The card is named by `card_number` (its
 * UUID or its ciphered number, as in every card operation), must be ACTIVE and in the caller's
 * subtree, and its PIN must match (wrong PINs are counted and lock the PIN). The card pays amount
 * + the product's FLAT commission + IVA; the order goes to the rail through the outbox.
 */
export const successMessage = "Operación SPEI® Out exitosa.";

export const CardTransferBody = Type.Object(
  {
    card_number: CardNumber,
    ...BeneficiaryProperties,
    amount: Pesos("MXN, at most 2 decimals", limits.amountCentsMax),
    pin: Type.String({
      minLength: 4,
      maxLength: limits.cipherTextLengthMax,
      description: "The card's PIN: 4-6 digits, or ciphered under the system key (RSA-OAEP-SHA256, Base64)",
    }),
  },
  { additionalProperties: false },
);

export const CardTransferData = Type.Object({
  card: Type.Object({
    card_id: Type.String(),
    card_type: Type.String(),
    masked_card_number: Type.String(),
    last_four: Type.String(),
  }),
  account: Type.Object({
    account_id: Type.String(),
    rfc: OrNull(Type.String(), { description: "null when blank (a product allowed it)" }),
    curp: OrNull(Type.String(), { description: "null when blank (a product allowed it)" }),
    primary_phone: Type.String(),
    mobile_phone: Type.String(),
    observations: Type.String(),
  }),
  transfer: Type.Object({
    id: Type.String(),
    tracking_key: Type.String(),
    operation_date: Type.String({ description: "YYYY-MM-DD" }),
    reference_operation: Type.String({ format: "uuid" }),
    amount: Type.Number(),
    commission: Type.Number(),
    commission_type: Type.Literal("FLAT"),
    iva: Type.Number(),
  }),
});

export async function sendCardTransfer(
  ctx: AppContext,
  caller: Caller,
  body: Static<typeof CardTransferBody>,
  draft: IdempotencyDraft | undefined,
): Promise<IdempotentResult> {
  const amountCents = parsePesos(body.amount, "amount", { maxCents: limits.amountCentsMax });
  const beneficiary = validateBeneficiary(body);
  const ref = await parseCardNumber(ctx, body.card_number);
  // The PIN is left out of the fingerprint: it is checked on every attempt that is not a replay.
  const { scope: idempotency, stored } = await completeDraft(ctx.db, draft, {
    card_number: cardRefName(ref),
  });
  if (stored) return stored;
  const request: TransferRequest = { caller, ref, pinText: body.pin, amountCents, beneficiary, idempotency };
  const known = ctx.knownCards.find(caller.clientId, ref);
  return known ? sendKnown(ctx, request, known) : sendRead(ctx, request, true);
}

interface TransferRequest {
  caller: Caller;
  ref: CardRef;
  pinText: string;
  amountCents: bigint;
  beneficiary: Beneficiary;
  idempotency: IdempotencyScope | undefined;
}

/**
 * From a card seen before: nothing is read. The batch checks the PIN's verification value and the
 * card's state under lock; when it cannot, the transfer is read and checked as any other.
 */
async function sendKnown(ctx: AppContext, request: TransferRequest, card: SpendingCard) {
  const pin = await readPin(ctx, request.pinText, true);
  const pinHash = pinVerificationValue(ctx, card.id, pin);
  const prepared = prepareSpeiOrder(orderInput(ctx, request, card));
  return submit(ctx, request, card, prepared, pinHash, () => sendRead(ctx, request, false));
}

/**
 * From the card as read now: refused as the key's final answer when it cannot pay, its PIN checked
 * (a wrong one counted even though the request then fails), then batched (`batched`, and the card
 * covers it) or sent on its own.
 */
async function sendRead(ctx: AppContext, request: TransferRequest, batched: boolean) {
  const { caller, ref, idempotency } = request;
  const resolved = await checkBeforeWork(ctx.db, idempotency, async () => {
    const found = await findSpendingCard(ctx.db, caller.clientId, ref);
    if (!found) throw new AppError(errors.cardNotFound);
    ctx.knownCards.remember(caller.clientId, ref, found);
    return activeOrThrow(found);
  });
  if ("stored" in resolved) return resolved.stored;
  const card = resolved.value;
  const pinHash = await verifyPin(ctx, card, request.pinText);
  const alone = () => sendAlone(ctx, request, card);
  const prepared = prepareSpeiOrder(orderInput(ctx, request, card));
  if (!batched || card.balance_cents < prepared.totalCents) return alone();
  return submit(ctx, request, card, prepared, pinHash, alone);
}

/** Queues the transfer for the next batch; `alone` answers it when its batch cannot be written. */
function submit(
  ctx: AppContext,
  request: TransferRequest,
  card: SpendingCard,
  prepared: PreparedSpeiOrder,
  pinHash: string,
  alone: () => Promise<IdempotentResult>,
): Promise<IdempotentResult> {
  const order = speiOrderOf(prepared);
  const answer = okReply(transferData(card, order), successMessage);
  const { idempotency } = request;
  return ctx.transferBatcher.submit({
    transfer: {
      row: prepared.row,
      entry: prepared.entry,
      event: outboxRow({ type: "transfer.out.created", clientId: card.client_id, data: order.view }),
      record: idempotency && {
        apiKeyId: idempotency.apiKeyId,
        key: idempotency.key,
        requestHash: idempotency.requestHash,
        ...answer,
      },
      card: { id: card.id, pinHash, commissionCents: card.transfer_commission_cents },
    },
    answer: { ...answer, replayed: false },
    alone: async () => {
      const result = await alone().catch((error: unknown) => {
        ctx.knownCards.ranAlone(card.id, false);
        throw error;
      });
      ctx.knownCards.ranAlone(card.id, result.status === 200);
      return result;
    },
  });
}

function orderInput(ctx: AppContext, request: TransferRequest, card: SpendingCard): SpeiOrderInput {
  return {
    clientId: card.client_id,
    payerAccountId: card.id,
    cardId: card.id,
    amountCents: request.amountCents,
    commissionCents: card.transfer_commission_cents,
    beneficiary: request.beneficiary,
    vaultKey: ctx.keys.vault,
  };
}

/** The transfer in a transaction of its own: the card re-read under lock, the order, the entry. */
function sendAlone(ctx: AppContext, request: TransferRequest, card: SpendingCard): Promise<IdempotentResult> {
  return runIdempotent(
    ctx.db,
    request.idempotency,
    async (tx) => {
      // The card may have been blocked since: re-read it under lock, and pay only if still ACTIVE.
      const locked = await lockActiveCard(tx, request.caller, card.id);
      const order = await createSpeiOrder(tx, {
        ...orderInput(ctx, request, card),
        commissionCents: locked.transfer_commission_cents,
      });
      return transferData(card, order);
    },
    { message: successMessage },
  );
}

/** The 4.10 answer: the card, its holder's account as read before the money moved, the transfer. */
function transferData(card: SpendingCard, order: SpeiOrder) {
  return {
    card: {
      card_id: card.id,
      card_type: card.card_type,
      masked_card_number: maskedCardNumber(card.last_four),
      last_four: card.last_four,
    },
    account: {
      account_id: card.account_id,
      rfc: card.rfc,
      curp: card.curp,
      primary_phone: card.primary_phone ?? "",
      mobile_phone: card.mobile_phone ?? "",
      observations: card.observations,
    },
    transfer: {
      id: order.id,
      tracking_key: order.trackingKey,
      operation_date: order.operationDate,
      reference_operation: order.referenceOperation,
      amount: toPesos(order.amountCents),
      commission: toPesos(order.commissionCents),
      commission_type: "FLAT" as const,
      iva: toPesos(order.ivaCents),
    },
  };
}
