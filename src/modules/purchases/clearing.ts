import type { Tx } from "../../db/database.ts";
import { AppError, errors } from "../../errors.ts";
import { postingShardOf, systemAccounts } from "../../ledger/accounts.ts";
import { timeOrderedUuid } from "../../ledger/ids.ts";
import { toPesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import type { NewEvent } from "../events/outbox.ts";
import { type CardEntry, postCardEntry, spendable } from "./card-money.ts";
import { type CardMessage, lockAuthorization, lockNamedCard, type Outcome } from "./message.ts";
import * as repo from "./repository.ts";

/**
 * The tip rule: a clearing may exceed what was authorized by `tipTolerancePercent` on restaurant
 * and bar MCCs (5812, 5813, 5814), and by nothing elsewhere. A clearing cannot be refused, so one
 * beyond the rule still posts (the card pays what it can and owes the rest); its answer and the
 * clearing file's report flag it `over_tolerance` for the issuer to dispute.
 */
export function withinTolerance(authorizedCents: bigint, clearedCents: bigint, mcc: string): boolean {
  const percent = limits.tipToleranceMccs.includes(mcc) ? BigInt(limits.tipTolerancePercent) : 0n;
  return clearedCents * 100n <= authorizedCents * (100n + percent);
}

/** `card_transaction.created`: a clearing, a force post, a return or a return reversal posted. */
export function transactionEvent(
  message: CardMessage,
  card: repo.CardState,
  amountCents: bigint,
  authorizationId: string | null,
): NewEvent {
  return {
    type: "card_transaction.created",
    clientId: card.client_id,
    data: {
      message_id: message.messageId,
      type: message.type,
      card_id: card.id,
      authorization_id: authorizationId,
      amount: toPesos(amountCents),
      merchant: message.merchant ?? null,
      // The card after the posting: what it can spend, and what it owes when it could not cover it.
      card: { available: toPesos(spendable(card)), owed: toPesos(card.owed_cents) },
      created_at: new Date().toISOString(),
    },
  };
}

/**
 * What a posting message (a clearing, a force post, a return or its reversal) answers and records:
 * the amount posted, the card and authorization after it, and its `card_transaction.created`.
 */
export function postedOutcome(
  message: CardMessage,
  card: repo.CardState,
  posted: {
    authorization: repo.AuthorizationRow | null;
    entryId: string | null;
    overTolerance?: boolean;
    /** The authorization the event names, when the outcome has none (a return reversal's). */
    eventAuthorizationId?: string | null;
    /** What posted, when the message does not say (a return reversal takes its return's). */
    amountCents?: bigint;
  },
): Outcome {
  const amount = posted.amountCents ?? message.amountCents ?? 0n;
  return {
    result: "POSTED",
    amountCents: amount,
    ...(posted.overTolerance === undefined ? {} : { overTolerance: posted.overTolerance }),
    card,
    authorization: posted.authorization,
    entryId: posted.entryId,
    events: [
      transactionEvent(
        message,
        card,
        amount,
        posted.eventAuthorizationId ?? posted.authorization?.id ?? null,
      ),
    ],
  };
}

/** What a CLEARING of an authorization moves and changes, decided before anything is written. */
export interface ClearingPlan {
  entry: CardEntry;
  change: Required<Pick<repo.AuthorizationChange, "cleared_cents" | "held_cents" | "status">>;
  overTolerance: boolean;
}

/**
 * CLEARING of an authorization: the amount settles from the hold, and from the card for what goes
 * beyond the hold (a tip, a clearing after the hold expired). A final clearing (the default) gives
 * the rest of the hold back; `is_final: false` (split shipment) keeps it for the next clearing.
 * Pure, so that the messages route and a clearing file's batches decide alike; `networkShard` is
 * the CARD_NETWORK shard the entry posts to.
 */
export function planClearing(
  message: CardMessage,
  authorization: repo.AuthorizationRow,
  networkShard: string,
): ClearingPlan {
  const amount = message.amountCents ?? 0n;
  const held = authorization.held_cents;
  const fromHold = message.isFinal ? held : amount < held ? amount : held;
  const shard = authorization.hold_account_id ?? postingShardOf(systemAccounts.cardHolds);
  const cleared = authorization.cleared_cents + amount;
  const remaining = held - fromHold;
  return {
    entry: {
      kind: "CARD_CLEARING",
      description: (authorization.merchant as { name?: string }).name ?? "Card purchase",
      system: [
        { accountId: shard, amountCents: -fromHold },
        { accountId: networkShard, amountCents: amount },
      ],
      metadata: { authorization_id: authorization.id, message_id: message.messageId },
    },
    change: { cleared_cents: cleared, held_cents: remaining, status: remaining > 0n ? "PENDING" : "SETTLED" },
    overTolerance: !withinTolerance(authorization.authorized_cents, cleared, authorization.mcc),
  };
}

async function clearAuthorization(tx: Tx, message: CardMessage): Promise<Outcome> {
  const { card, authorization } = await lockAuthorization(tx, message);
  const plan = planClearing(message, authorization, postingShardOf(systemAccounts.cardNetwork));
  const entryId = await postCardEntry(tx, card, plan.entry);
  const updated = await repo.updateAuthorization(tx, authorization, plan.change);
  return postedOutcome(message, card, { authorization: updated, entryId, overTolerance: plan.overTolerance });
}

/** A force post's entry and its authorization's row (SETTLED, its own), decided before writing. */
export function planForcePost(
  message: CardMessage,
  card: repo.CardState,
  networkShard: string,
): { entry: CardEntry; row: repo.NewAuthorization } {
  const amount = message.amountCents ?? 0n;
  const id = timeOrderedUuid();
  return {
    entry: {
      kind: "CARD_FORCE_POST",
      description: message.merchant?.name ?? "Card purchase",
      system: [{ accountId: networkShard, amountCents: amount }],
      metadata: { authorization_id: id, message_id: message.messageId },
    },
    row: {
      id,
      card_id: card.id,
      client_id: card.client_id,
      status: "SETTLED",
      force_post: true,
      currency: message.currency,
      merchant_amount: message.merchantAmount,
      requested_cents: amount,
      authorized_cents: 0n,
      held_cents: 0n,
      cleared_cents: amount,
      authorization_code: null,
      decline_reason: null,
      channel: message.channel,
      partial_allowed: false,
      merchant: message.merchant ?? {},
      mcc: message.merchant?.mcc ?? "0000",
      hold_account_id: null,
      expires_at: null,
    },
  };
}

/** CLEARING naming no authorization: a force post, recorded as a SETTLED authorization of its own. */
async function forcePost(tx: Tx, message: CardMessage): Promise<Outcome> {
  const card = await lockNamedCard(tx, message.card);
  const plan = planForcePost(message, card, postingShardOf(systemAccounts.cardNetwork));
  const entryId = await postCardEntry(tx, card, plan.entry);
  const authorization = await repo.insertAuthorization(tx, plan.row);
  return postedOutcome(message, card, { authorization, entryId });
}

export async function clear(tx: Tx, message: CardMessage): Promise<Outcome> {
  return message.authorizationId ? clearAuthorization(tx, message) : forcePost(tx, message);
}

/** A RETURN's entry: the refund from what the issuer owes the network to the card. */
export function returnEntry(
  message: CardMessage,
  authorization: repo.AuthorizationRow | null,
  networkShard: string,
): CardEntry {
  return {
    kind: "CARD_RETURN",
    description: message.merchant?.name ?? "Card refund",
    system: [{ accountId: networkShard, amountCents: -(message.amountCents ?? 0n) }],
    metadata: { message_id: message.messageId, authorization_id: authorization?.id ?? null },
  };
}

/** RETURN: a refund the merchant sends back, credited to the card (what it owes is repaid first). */
export async function creditReturn(tx: Tx, message: CardMessage): Promise<Outcome> {
  const named = message.authorizationId ? await lockAuthorization(tx, message) : undefined;
  const card = named?.card ?? (await lockNamedCard(tx, message.card));
  const entryId = await postCardEntry(
    tx,
    card,
    returnEntry(message, named?.authorization ?? null, postingShardOf(systemAccounts.cardNetwork)),
  );
  return postedOutcome(message, card, { authorization: named?.authorization ?? null, entryId });
}

/** RETURN_REVERSAL: takes a return back from the card, once; what it cannot cover, it owes. */
export async function reverseReturn(tx: Tx, message: CardMessage): Promise<Outcome> {
  if (!message.originalMessageId)
    throw new AppError(errors.validationFailed, { message: "RETURN_REVERSAL requires original_message_id" });
  const original = await repo.findMessage(tx, message.originalMessageId);
  if (!original?.card_id) throw new AppError(errors.networkMessageNotFound);
  if (original.type !== "RETURN") throw new AppError(errors.originalNotAReturn);
  const card = await lockNamedCard(tx, { id: original.card_id });
  if (await repo.returnReversed(tx, original.message_id)) throw new AppError(errors.returnAlreadyReversed);
  const amount = original.amount_cents ?? 0n;
  const entryId = await postCardEntry(tx, card, {
    kind: "CARD_RETURN_REVERSAL",
    description: "Refund reversed",
    system: [{ accountId: postingShardOf(systemAccounts.cardNetwork), amountCents: amount }],
    metadata: { message_id: message.messageId, reverses_message_id: original.message_id },
  });
  return {
    ...postedOutcome(message, card, {
      authorization: null,
      entryId,
      eventAuthorizationId: original.authorization_id,
      amountCents: amount,
    }),
    reversesMessageId: original.message_id,
  };
}
