import assert from "node:assert/strict";
import { sql } from "kysely";
import type { Static } from "typebox";
import { Type } from "typebox";
import type { AppContext } from "../../context.ts";
import type { Db } from "../../db/database.ts";
import {
  checkBeforeWork,
  completeDraft,
  type IdempotencyDraft,
  type IdempotentResult,
  runIdempotent,
} from "../../db/idempotency.ts";
import type { Caller } from "../../http/caller.ts";
import { ok } from "../../http/envelope.ts";
import { OrNull, Pesos } from "../../http/schemas.ts";
import { parsePesos, toPesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import { cardRefName, maskedCardNumber, parseCardNumber } from "../cards/card-number.ts";
import { verifyPin } from "../cards/pin.ts";
import { CardNumber } from "../cards/schemas.ts";
import { lockActiveCard, resolveActiveCard } from "../cards/service.ts";
import { BeneficiaryProperties, validateBeneficiary } from "./beneficiary.ts";
import { createSpeiOrder } from "./outgoing.ts";

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
  // A card that cannot pay is the key's final answer, as every refusal on the caller's data.
  const resolved = await checkBeforeWork(ctx.db, idempotency, () => resolveActiveCard(ctx, caller, ref));
  if ("stored" in resolved) return resolved.stored;
  const card = resolved.value;
  // Recorded on its own: a wrong PIN is counted even though this request then fails.
  await verifyPin(ctx, card, body.pin);
  const holder = await payerDetails(ctx.db, card);
  return runIdempotent(ctx.db, idempotency, async (tx) => {
    // The card may have been blocked since: re-read it under lock, and pay only if still ACTIVE.
    const locked = await lockActiveCard(tx, caller, card.id);
    const order = await createSpeiOrder(tx, {
      clientId: locked.client_id,
      payerAccountId: locked.id,
      cardId: locked.id,
      amountCents,
      commissionCents: locked.transfer_commission_cents,
      beneficiary,
      vaultKey: ctx.keys.vault,
    });
    const data = {
      card: {
        card_id: locked.id,
        card_type: locked.card_type,
        masked_card_number: maskedCardNumber(locked.last_four),
        last_four: locked.last_four,
      },
      account: { account_id: locked.account_id, ...holder },
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
    return { status: 200, body: ok(data, successMessage) };
  });
}

/** What the answer shows of the card's holder and account, read before the money moves. */
async function payerDetails(db: Db, card: { cardholder_id: string; account_id: string }) {
  const result = await sql<{
    rfc: string | null;
    curp: string | null;
    primary_phone: string | null;
    mobile_phone: string | null;
    observations: string;
  }>`
    select h.rfc, h.curp, h.primary_phone, h.mobile_phone, a.observations
    from accounts a left join cardholders h on h.id = ${card.cardholder_id}
    where a.id = ${card.account_id}`.execute(db);
  const row = result.rows[0];
  assert.ok(row, `account ${card.account_id} of a card is missing`);
  return {
    rfc: row.rfc,
    curp: row.curp,
    primary_phone: row.primary_phone ?? "",
    mobile_phone: row.mobile_phone ?? "",
    observations: row.observations,
  };
}
