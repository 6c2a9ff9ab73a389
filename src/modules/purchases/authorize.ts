import { randomInt } from "node:crypto";
import type { Tx } from "../../db/database.ts";
import { postingShardOf, systemAccounts } from "../../ledger/accounts.ts";
import { timeOrderedUuid } from "../../ledger/ids.ts";
import { expirationOf, isExpired } from "../cards/expiry.ts";
import { controlOf, controlsOfCard, controlsOnTargets, targetsOf } from "../controls/repository.ts";
import {
  type Control,
  controlDecline,
  controlDeclineReasons,
  countsSpending,
  type Purchase,
  purchaseCountry,
} from "../controls/rules.ts";
import { windowKeysAt } from "../controls/windows.ts";
import { postCardEntry, spendable } from "./card-money.ts";
import {
  authorizationEvent,
  type CardMessage,
  holdDaysFor,
  lockNamedCard,
  type Outcome,
  type PurchaseSettings,
} from "./message.ts";
import * as repo from "./repository.ts";
import { readSpending, type Spending, spendingAt } from "./spending.ts";

/**
 * The decline reasons, in the order they are checked: the card's own state, the card's
 * verification (card not present, PIN), the spending controls in scope, the money, then the
 * client's real-time decision (its own reason, or its stand-in's).
 */
export const verificationDeclines = [
  "INCORRECT_EXPIRY",
  "INCORRECT_CVV",
  "INCORRECT_PIN",
  "PIN_LOCKED",
] as const;
export type VerificationDecline = (typeof verificationDeclines)[number];
export const declineReasons = [
  "UNKNOWN_CARD",
  "CLIENT_DISABLED",
  "CARD_CANCELED",
  "CARD_NOT_ACTIVE",
  "CARD_BLOCKED",
  "CARD_EXPIRED",
  ...verificationDeclines,
  ...controlDeclineReasons,
  "INSUFFICIENT_FUNDS",
  "WEBHOOK_TIMEOUT",
  "WEBHOOK_ERROR",
  "CLIENT_DECLINED",
] as const;
export type DeclineReason = (typeof declineReasons)[number];

/** What a decision rests on beyond the card: its controls, what it spent, its verification. */
export interface DecisionContext {
  controls: readonly Control[];
  /** What the card spent in the windows of now, before this purchase (its running state). */
  spending: Spending | null;
  /** A check the message failed before it was decided (CVV2, expiry, PIN). */
  verification?: VerificationDecline | null | undefined;
}

const noControls: DecisionContext = { controls: [], spending: null };

/** The purchase as spending controls see it. */
export function purchaseOf(message: Pick<CardMessage, "amountCents" | "channel" | "merchant">): Purchase {
  return {
    amountCents: message.amountCents ?? 0n,
    channel: message.channel,
    mcc: message.merchant?.mcc ?? "0000",
    country: purchaseCountry(message.merchant?.country),
  };
}

/** Why the card cannot be used now, whatever the amount; null when it can. */
export function cardDeclineReason(card: repo.CardState): DeclineReason | null {
  if (card.client_disabled) return "CLIENT_DISABLED";
  if (card.status === "CANCELED") return "CARD_CANCELED";
  if (card.status === "NEED_ACTIVATION" || card.status === "NOT_ASSIGNED") return "CARD_NOT_ACTIVE";
  if (card.status === "TEMPORARY_INACTIVE") return "CARD_BLOCKED";
  if (isExpired(card.expires_on)) return "CARD_EXPIRED";
  return null;
}

/**
 * The decision on the card as it is now: a decline reason, or the amount approved (what was asked,
 * or with partial approval allowed, what the card can spend when it is short).
 */
export function decide(
  card: repo.CardState,
  message: Pick<CardMessage, "amountCents" | "partialAllowed" | "channel" | "merchant" | "expiration">,
  context: DecisionContext = noControls,
): { reason: DeclineReason | null; approved: bigint } {
  const asked = message.amountCents ?? 0n;
  const reason =
    cardDeclineReason(card) ??
    expiryDecline(card, message) ??
    context.verification ??
    controlDecline(context.controls, purchaseOf(message), context.spending);
  if (reason !== null) return { reason, approved: 0n };
  const available = spendable(card);
  if (asked <= available) return { reason: null, approved: asked };
  if (message.partialAllowed && available > 0n) return { reason: null, approved: available };
  return { reason: "INSUFFICIENT_FUNDS", approved: 0n };
}

/** The expiry the cardholder gave (MMYY), when the network sent it, against the card's. */
function expiryDecline(
  card: repo.CardState,
  message: Pick<CardMessage, "expiration">,
): "INCORRECT_EXPIRY" | null {
  if (message.expiration === undefined) return null;
  return message.expiration === expirationOf(card.expires_on).replace("/", "") ? null : "INCORRECT_EXPIRY";
}

export function authorizationCode(): string {
  return String(randomInt(0, 1_000_000)).padStart(6, "0");
}

/**
 * AUTHORIZATION (0100): approve or decline now. Approved, the amount (or, when partial approval is
 * allowed and the card is short, what it can spend) moves to a hold; a zero amount is an account
 * verification, approved with nothing held. An unknown card is declined with no authorization.
 */
export async function authorize(tx: Tx, message: CardMessage, settings: PurchaseSettings): Promise<Outcome> {
  const card = message.card ? await repo.lockCard(tx, message.card) : undefined;
  if (!card) return unknownCard();
  const asked = message.amountCents ?? 0n;
  const { reason, approved } = decide(card, message, await decisionContext(tx, card, message));
  if (reason !== null) {
    const declined = await newAuthorization(tx, message, card, { status: "DECLINED", reason, held: 0n });
    return {
      result: "DECLINED",
      amountCents: 0n,
      declineReason: reason,
      card,
      authorization: declined,
      entryId: null,
      events: [authorizationEvent("card_authorization.created", declined)],
    };
  }
  // The client decides what Emisor approved; the hold is taken first, so nothing spends it twice.
  const endpoint =
    approved > 0n
      ? (await settings.endpoints?.forClients([card.client_id], tx))?.get(card.client_id)
      : undefined;
  const held = await holdOnCard(tx, message, card, approved, settings, endpoint !== undefined);
  return {
    result: "APPROVED",
    amountCents: approved,
    partial: approved < asked,
    card,
    authorization: held.authorization,
    entryId: held.entryId,
    // Created (its event) once the client decided.
    events: endpoint ? [] : [authorizationEvent("card_authorization.created", held.authorization)],
    awaiting: endpoint
      ? {
          authorization: held.authorization,
          messageId: message.messageId,
          cardholderId: card.cardholder_id,
          endpoint,
        }
      : undefined,
  };
}

/**
 * The card's controls and what it spent, read once its ledger row is locked: every change of its
 * spending locks that row first, so this read sees the last one.
 */
async function decisionContext(tx: Tx, card: repo.CardState, message: CardMessage): Promise<DecisionContext> {
  const { rows } = await controlsOnTargets(tx, targetsOf(card));
  const controls = controlsOfCard(card, rows.map(controlOf));
  const spending = countsSpending(controls)
    ? spendingAt(await readSpending(tx, card.id), windowKeysAt(Date.now()))
    : null;
  return { controls, spending, verification: message.verification };
}

function unknownCard(): Outcome {
  return {
    result: "DECLINED",
    amountCents: 0n,
    declineReason: "UNKNOWN_CARD",
    card: null,
    authorization: null,
    entryId: null,
    events: [],
  };
}

/**
 * A new authorization holding `amount` of the card: the hold's entry (what the card cannot cover,
 * for an advice, is posted to what it owes) and its row, PENDING until cleared, released or
 * expired. A zero hold (an account verification) is VOIDED at once: nothing will clear it.
 */
export async function holdOnCard(
  tx: Tx,
  message: CardMessage,
  card: repo.CardState,
  amount: bigint,
  settings: PurchaseSettings,
  awaiting = false,
): Promise<{ authorization: repo.AuthorizationRow; entryId: string | null }> {
  const id = timeOrderedUuid();
  const shard = postingShardOf(systemAccounts.cardHolds);
  const entryId =
    amount > 0n
      ? await postCardEntry(tx, card, {
          kind: "CARD_HOLD",
          description: message.merchant?.name ?? "Card purchase",
          system: [{ accountId: shard, amountCents: amount }],
          metadata: { authorization_id: id, message_id: message.messageId },
        })
      : null;
  const days = holdDaysFor(message.merchant?.mcc ?? "0000", settings);
  const authorization = await newAuthorization(tx, message, card, {
    id,
    status: amount > 0n ? "PENDING" : "VOIDED",
    reason: null,
    held: amount,
    shard,
    expiresAt: amount > 0n ? new Date(Date.now() + days * 86_400_000) : null,
    decision: awaiting ? "AWAITING" : null,
  });
  return { authorization, entryId };
}

async function newAuthorization(
  tx: Tx,
  message: CardMessage,
  card: repo.CardState,
  state: {
    id?: string;
    status: repo.AuthorizationRow["status"];
    reason: string | null;
    held: bigint;
    shard?: string;
    expiresAt?: Date | null;
    decision?: "AWAITING" | null;
  },
): Promise<repo.AuthorizationRow> {
  return repo.insertAuthorization(tx, {
    id: state.id ?? timeOrderedUuid(),
    card_id: card.id,
    client_id: card.client_id,
    status: state.status,
    force_post: false,
    currency: message.currency,
    merchant_amount: message.merchantAmount,
    requested_cents: message.amountCents ?? 0n,
    authorized_cents: state.held,
    held_cents: state.status === "PENDING" ? state.held : 0n,
    cleared_cents: 0n,
    authorization_code: state.status === "DECLINED" ? null : authorizationCode(),
    decline_reason: state.reason,
    channel: message.channel,
    partial_allowed: message.partialAllowed,
    merchant: message.merchant ?? {},
    mcc: message.merchant?.mcc ?? "0000",
    hold_account_id: state.shard ?? null,
    expires_at: state.expiresAt ?? null,
    decision: state.decision ?? null,
  });
}

/** BALANCE_INQUIRY (an ATM asking): the card's balances, or why it cannot be used; nothing moves. */
export async function balanceInquiry(tx: Tx, message: CardMessage): Promise<Outcome> {
  const card = message.card ? await repo.lockCard(tx, message.card) : undefined;
  if (!card) return unknownCard();
  const reason = cardDeclineReason(card);
  return {
    result: reason === null ? "ANSWERED" : "DECLINED",
    amountCents: 0n,
    declineReason: reason,
    card,
    authorization: null,
    entryId: null,
    events: [],
  };
}

/**
 * An advice naming no authorization: the network approved in Emisor's stead (stand-in), and the
 * decision cannot be refused. The hold is taken whatever the card's state; what the card cannot
 * cover is posted to what it owes.
 */
export async function standInAdvice(
  tx: Tx,
  message: CardMessage,
  settings: PurchaseSettings,
): Promise<Outcome> {
  const card = await lockNamedCard(tx, message.card);
  const amount = message.amountCents ?? 0n;
  const held = await holdOnCard(tx, message, card, amount, settings);
  return {
    result: "APPROVED",
    amountCents: amount,
    card,
    authorization: held.authorization,
    entryId: held.entryId,
    events: [authorizationEvent("card_authorization.created", held.authorization)],
  };
}
