import type { Tx } from "../../db/database.ts";
import { AppError, errors } from "../../errors.ts";
import type { CardRef } from "../cards/card-number.ts";
import type { NewEvent } from "../events/outbox.ts";
import type { VerificationDecline } from "./authorize.ts";
import type { AwaitingDecision } from "./decisions.ts";
import type { EndpointCache } from "./endpoint-cache.ts";
import * as repo from "./repository.ts";
import type { MerchantType, MessageType } from "./schemas.ts";
import { renderAuthorization } from "./views.ts";

/** A processor's message as the handlers take it: amounts in MXN centavos, the card resolved. */
export interface CardMessage {
  messageId: string;
  type: MessageType | "AUTHORIZATION_EXPIRY";
  card?: CardRef | undefined;
  authorizationId?: string | undefined;
  originalMessageId?: string | undefined;
  /** MXN centavos: the billing amount for another currency. */
  amountCents?: bigint | undefined;
  currency: string;
  merchantAmount: bigint;
  merchant?: MerchantType | undefined;
  channel: string;
  partialAllowed: boolean;
  isFinal: boolean;
  fileId?: string | undefined;
  /** An AUTHORIZATION's card expiry as the network gives it (MMYY), checked against the card. */
  expiration?: string | undefined;
  /** Its CVV2 and PIN, ciphered under the system key, checked before it is decided. */
  cvv2?: string | undefined;
  pin?: string | undefined;
  /** An AUTHORIZATION's card verification (CVV2, PIN) that failed before it was decided. */
  verification?: VerificationDecline | null | undefined;
}

export type MessageResult = "APPROVED" | "DECLINED" | "POSTED" | "RELEASED" | "ANSWERED";

/** What a handler did: the answer's core, and what the message row and the events record. */
export interface Outcome {
  result: MessageResult;
  amountCents: bigint;
  partial?: boolean;
  /** A clearing beyond the tip rule (clearing.ts): posted, and flagged. */
  overTolerance?: boolean;
  declineReason?: string | null;
  card: repo.CardState | null;
  authorization: repo.AuthorizationRow | null;
  entryId: string | null;
  reversesMessageId?: string;
  events: NewEvent[];
  /** An approval the card's client is asked about; its answer is added once it is known. */
  awaiting?: Omit<AwaitingDecision, "answer"> | undefined;
}

/** How long a hold lasts before the expiry worker releases it (config: EMISOR_HOLD_DAYS*). */
export interface PurchaseSettings {
  holdDays: number;
  lodgingHoldDays: number;
  /** Each client's decision endpoint (absent: no client is asked). */
  endpoints?: EndpointCache | undefined;
}

/** Hotels and car rentals hold for longer: ISO 18245's lodging and rental ranges and codes. */
export function holdDaysFor(mcc: string, settings: PurchaseSettings): number {
  const code = Number(mcc);
  const lodging =
    (code >= 3351 && code <= 3441) || (code >= 3501 && code <= 3999) || [7011, 7512, 7513].includes(code);
  return lodging ? settings.lodgingHoldDays : settings.holdDays;
}

/** The card the message names, locked; a message about an authorization uses its card. */
export async function lockNamedCard(tx: Tx, ref: CardRef | undefined): Promise<repo.CardState> {
  if (!ref) throw new AppError(errors.validationFailed, { message: "card_id or card_number is required" });
  const card = await repo.lockCard(tx, ref);
  if (!card) throw new AppError(errors.cardNotFound);
  return card;
}

/**
 * The authorization a follow-up message names, with its card locked first (every change of a hold
 * locks the card, then reads the authorization, so changes of one authorization never interleave).
 */
export async function lockAuthorization(
  tx: Tx,
  message: CardMessage,
): Promise<{ card: repo.CardState; authorization: repo.AuthorizationRow }> {
  if (!message.authorizationId)
    throw new AppError(errors.validationFailed, { message: `${message.type} requires authorization_id` });
  const first = await repo.findAuthorization(tx, message.authorizationId);
  if (!first) throw new AppError(errors.authorizationNotFound);
  if (message.card && "id" in message.card && message.card.id !== first.card_id)
    throw new AppError(errors.authorizationOfAnotherCard);
  const card = await lockNamedCard(tx, { id: first.card_id });
  const authorization = await repo.findAuthorization(tx, first.id);
  if (!authorization) throw new AppError(errors.authorizationNotFound);
  return { card, authorization };
}

/** The authorization events: created (approved or declined), updated (advice, reversal, expiry). */
export function authorizationEvent(
  type: "card_authorization.created" | "card_authorization.updated",
  authorization: repo.AuthorizationRow,
): NewEvent {
  return { type, clientId: authorization.client_id, data: renderAuthorization(authorization) };
}
