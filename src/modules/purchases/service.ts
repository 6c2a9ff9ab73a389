import type { AppContext } from "../../context.ts";
import type { Db, Tx } from "../../db/database.ts";
import { invalidField } from "../../errors.ts";
import { type CardRef, parseCardNumber } from "../cards/card-number.ts";
import { emitEvents } from "../events/outbox.ts";
import { authorize, balanceInquiry, standInAdvice } from "./authorize.ts";
import { spendable } from "./card-money.ts";
import { clear, creditReturn, reverseReturn } from "./clearing.ts";
import type { AwaitingDecision } from "./decisions.ts";
import { adviseHold, releaseHold } from "./holds.ts";
import type { CardMessage, Outcome, PurchaseSettings } from "./message.ts";
import * as repo from "./repository.ts";
import type { CardMessageBodyType } from "./schemas.ts";

/** The answer to a processor's message, as stored for its repeats (amounts in MXN centavos). */
export interface MessageAnswer {
  message_id: string;
  type: string;
  result: string;
  authorization_id: string | null;
  authorization_code: string | null;
  decline_reason: string | null;
  amount: number;
  partial: boolean;
  over_tolerance: boolean;
  balance: { available: number; held: number; owed: number } | null;
}

/** A message's answer, and whether it repeats the answer given to the same message id before. */
export interface Processed {
  answer: MessageAnswer;
  replayed: boolean;
  /** The card whose money the message moved, when it moved any. */
  cardId?: string | undefined;
  /** An approval the card's client decides on now (decisions.ts): `answer` is Emisor's approval. */
  awaiting?: AwaitingDecision | undefined;
  /** A repeat of a message whose first is still being decided by the client: no answer yet. */
  undecided?: true;
}

const handlers: Record<
  CardMessage["type"],
  (tx: Tx, m: CardMessage, s: PurchaseSettings) => Promise<Outcome>
> = {
  AUTHORIZATION: authorize,
  AUTHORIZATION_ADVICE: (tx, m, s) => (m.authorizationId ? adviseHold(tx, m, s) : standInAdvice(tx, m, s)),
  AUTHORIZATION_REVERSAL: (tx, m) => releaseHold(tx, m),
  AUTHORIZATION_EXPIRY: (tx, m) => releaseHold(tx, m),
  CLEARING: (tx, m) => clear(tx, m),
  RETURN: (tx, m) => creditReturn(tx, m),
  RETURN_REVERSAL: (tx, m) => reverseReturn(tx, m),
  BALANCE_INQUIRY: (tx, m) => balanceInquiry(tx, m),
};

const retryableCodes = new Set(["40P01", "40001"]);

/**
 * Processes one message in one transaction: its id is claimed first, so a repeat (or the same
 * message racing itself) answers the first answer and moves nothing; then the handler decides and
 * moves the money, and the message row, the answer and the events commit with it. A refusal (an
 * unknown authorization) writes nothing. A deadlock is retried whole.
 */
export async function processMessage(
  db: Db,
  message: CardMessage,
  settings: PurchaseSettings,
): Promise<Processed> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction().execute((tx) => processInTransaction(tx, message, settings));
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (attempt >= 3 || code === undefined || !retryableCodes.has(code)) throw error;
    }
  }
}

async function processInTransaction(
  tx: Tx,
  message: CardMessage,
  settings: PurchaseSettings,
): Promise<Processed> {
  if (!(await repo.claimMessage(tx, message.messageId, message.type))) {
    const stored = (await repo.storedAnswer(tx, message.messageId)) as MessageAnswer | null;
    return stored === null
      ? { answer: undecidedAnswer(message), replayed: true, undecided: true }
      : { answer: stored, replayed: true };
  }
  const outcome = await handlers[message.type](tx, message, settings);
  const answer = await answerOf(tx, message, outcome);
  const awaiting = outcome.awaiting ? { ...outcome.awaiting, answer } : undefined;
  await repo.recordMessage(tx, {
    messageId: message.messageId,
    cardId: outcome.card?.id ?? null,
    clientId: outcome.card?.client_id ?? null,
    authorizationId: outcome.authorization?.id ?? null,
    // A decline moved nothing; its row keeps what was asked.
    amountCents: outcome.result === "DECLINED" ? (message.amountCents ?? 0n) : outcome.amountCents,
    entryId: outcome.entryId,
    reversesMessageId: outcome.reversesMessageId ?? null,
    fileId: message.fileId ?? null,
    merchant: message.merchant,
    // Asked of the client: the answer is recorded once it decided.
    response: awaiting ? null : answer,
  });
  await emitEvents(tx, outcome.events);
  return { answer, replayed: false, cardId: outcome.card?.id, awaiting };
}

/** A placeholder answer of a repeat whose first is undecided (never sent: see `undecided`). */
export function undecidedAnswer(message: Pick<CardMessage, "messageId" | "type">): MessageAnswer {
  return {
    message_id: message.messageId,
    type: message.type,
    result: "PENDING",
    authorization_id: null,
    authorization_code: null,
    decline_reason: null,
    amount: 0,
    partial: false,
    over_tolerance: false,
    balance: null,
  };
}

async function answerOf(tx: Tx, message: CardMessage, outcome: Outcome): Promise<MessageAnswer> {
  return answerFor(message, outcome, outcome.card ? await repo.heldOf(tx, outcome.card.id) : 0n);
}

/** The answer to a message, given what its card's pending authorizations hold once it applied. */
export function answerFor(message: CardMessage, outcome: Outcome, held: bigint): MessageAnswer {
  const card = outcome.card;
  return {
    message_id: message.messageId,
    type: message.type,
    result: outcome.result,
    authorization_id: outcome.authorization?.id ?? null,
    authorization_code:
      outcome.result === "APPROVED" ? (outcome.authorization?.authorization_code ?? null) : null,
    decline_reason: outcome.declineReason ?? null,
    amount: Number(outcome.amountCents),
    partial: outcome.partial ?? false,
    over_tolerance: outcome.overTolerance ?? false,
    balance: card
      ? { available: Number(spendable(card)), held: Number(held), owed: Number(card.owed_cents) }
      : null,
  };
}

/** What each type of message must carry beyond its id and type. */
const required: Record<CardMessageBodyType["type"], Array<keyof CardMessageBodyType>> = {
  AUTHORIZATION: ["amount", "merchant", "channel"],
  AUTHORIZATION_ADVICE: ["amount"],
  AUTHORIZATION_REVERSAL: ["authorization_id"],
  CLEARING: ["amount"],
  RETURN: ["amount"],
  RETURN_REVERSAL: ["original_message_id"],
  BALANCE_INQUIRY: [],
};

/**
 * A message body as the handlers take it: the card number deciphered to its fingerprint, the
 * MXN amount chosen (the billing amount for another currency), each type's fields present.
 * `deciphered` is the card number's reference when it was deciphered before (a clearing file
 * reads each line twice, and deciphers once).
 */
export async function messageOf(
  ctx: AppContext,
  body: CardMessageBodyType,
  fileId?: string,
  deciphered?: CardRef,
): Promise<CardMessage> {
  for (const field of required[body.type])
    if (body[field] === undefined) throw invalidField(field, "required", `is required for ${body.type}`);
  const needsCard =
    ["AUTHORIZATION", "BALANCE_INQUIRY"].includes(body.type) ||
    (["AUTHORIZATION_ADVICE", "CLEARING", "RETURN"].includes(body.type) && !body.authorization_id);
  if (needsCard && !body.card_id && !body.card_number)
    throw invalidField("card_id", "required", `card_id or card_number is required for ${body.type}`);
  if ((body.type === "CLEARING" || body.type === "RETURN") && !body.authorization_id && !body.merchant)
    throw invalidField("merchant", "required", `is required for a ${body.type} naming no authorization`);
  checkVerificationFields(body);
  const currency = body.currency ?? "484";
  if (currency !== "484" && body.billing_amount === undefined && body.amount !== undefined)
    throw invalidField("billing_amount", "required", "is required when currency is not 484");
  const amount = currency === "484" ? body.amount : body.billing_amount;
  return {
    messageId: body.message_id,
    type: body.type,
    card: body.card_id
      ? { id: body.card_id.toLowerCase() }
      : body.card_number
        ? (deciphered ?? (await parseCardNumber(ctx, body.card_number)))
        : undefined,
    authorizationId: body.authorization_id?.toLowerCase(),
    originalMessageId: body.original_message_id,
    amountCents: amount === undefined ? undefined : BigInt(amount),
    currency,
    merchantAmount: BigInt(body.amount ?? 0),
    merchant: body.merchant,
    channel: body.channel ?? "POS_CHIP",
    partialAllowed: body.partial_allowed ?? false,
    isFinal: body.is_final ?? true,
    fileId,
    expiration: body.expiration,
    cvv2: body.cvv2,
    pin: body.pin,
  };
}

/** The card's verification (expiry, CVV2, PIN) travels on authorizations only. */
function checkVerificationFields(body: CardMessageBodyType): void {
  if (body.type === "AUTHORIZATION") return;
  for (const field of ["expiration", "cvv2", "pin"] as const)
    if (body[field] !== undefined) throw invalidField(field, "type", `is not a field of ${body.type}`);
}

/** The settings purchases take from the configuration. */
export function purchaseSettings(ctx: AppContext): PurchaseSettings {
  return ctx.cardMessages.settings;
}
