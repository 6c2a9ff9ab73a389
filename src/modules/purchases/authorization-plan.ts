import { postingShardOf, systemAccounts } from "../../ledger/accounts.ts";
import { timeOrderedUuid } from "../../ledger/ids.ts";
import { type Control, countsSpending } from "../controls/rules.ts";
import type { WindowKeys } from "../controls/windows.ts";
import type { EffectiveEndpoint } from "../decisions/service.ts";
import { outboxRow } from "../events/outbox.ts";
import { authorizationCode, decide } from "./authorize.ts";
import type * as batchRepo from "./batch-repository.ts";
import { spendable } from "./card-money.ts";
import { type AwaitingDecision, awaitingOf } from "./decisions.ts";
import { authorizationEvent, type CardMessage, holdDaysFor, type PurchaseSettings } from "./message.ts";
import type { AuthorizationRow } from "./repository.ts";
import type { MessageAnswer } from "./service.ts";
import { addSpend, type SpendingDelta, spendingCopy, zeroCents, zeroCounts } from "./spending.ts";

/** The card a message names, as the batch looks it up: its id, or its number's fingerprint. */
export function cardKeyOf(message: CardMessage): string {
  return message.card ? ("id" in message.card ? message.card.id : message.card.fingerprint) : "";
}

/**
 * A batch decided: each message in arrival order against its card's running state (the same
 * decision `authorize` takes under lock), with the rows, entries, events and answers to write.
 * `cards` are the states decided on, changed in place as each hold is taken. `declinedCards` names
 * the cards that declined a message: a decline is answered only on a card read for this batch.
 */
export interface PlannedBatch {
  batch: batchRepo.AuthorizationBatch;
  answers: MessageAnswer[];
  declinedCards: Set<string>;
  /** Each card decided on, by id, as the batch leaves it. */
  decided: Map<string, batchRepo.BatchCard>;
  /** By message index: approvals the card's client decides on, once the batch committed. */
  awaiting: Map<number, AwaitingDecision>;
}

export interface PlanInputs {
  settings: PurchaseSettings;
  /** The spending controls that apply to each card, by card id. */
  controls: ReadonlyMap<string, readonly Control[]>;
  /** The windows of the batch's moment. */
  now: WindowKeys;
  /** The controls' generation they were read at: the statement requires it unchanged. */
  generation: bigint;
  /** The decision endpoint of each card's client that has one (its own or inherited). */
  endpoints: ReadonlyMap<string, EffectiveEndpoint>;
}

export function planBatch(
  messages: CardMessage[],
  cards: ReadonlyMap<string, batchRepo.BatchCard>,
  inputs: PlanInputs,
): PlannedBatch {
  const shard = postingShardOf(systemAccounts.cardHolds);
  const batch: batchRepo.AuthorizationBatch = {
    cards: [],
    entries: [],
    holdShard: { account: systemAccounts.cardHolds, shard },
    authorizations: [],
    messages: [],
    events: [],
    spending: { deltas: [], expected: new Map(), now: inputs.now },
    generation: inputs.generation,
  };
  const decidedOn = new Map<string, batchRepo.CardAsDecided>();
  const decided = new Map<string, batchRepo.BatchCard>();
  const declinedCards = new Set<string>();
  const awaiting = new Map<number, AwaitingDecision>();
  const answers = messages.map((message, index) => {
    const card = cards.get(cardKeyOf(message));
    if (!card) return planUnknownCard(batch, message);
    const controls = inputs.controls.get(card.id) ?? [];
    if (!decidedOn.has(card.id)) {
      decidedOn.set(card.id, asDecided(card));
      if (countsSpending(controls))
        batch.spending.expected.set(card.id, spendingCopy(card.spending, inputs.now));
    }
    decided.set(card.id, card);
    const endpoint = inputs.endpoints.get(card.client_id);
    const planned = planOne(batch, message, card, { shard, settings: inputs.settings, controls, endpoint });
    if (planned.awaiting) awaiting.set(index, planned.awaiting);
    if (planned.answer.result === "DECLINED") declinedCards.add(card.id);
    return planned.answer;
  });
  batch.cards = [...decidedOn.values()];
  batch.spending.deltas = spendingOfBatch(batch.authorizations);
  return { batch, answers, declinedCards, decided, awaiting };
}

/** What the statement must still find of a card for the batch's decisions to stand. */
function asDecided(card: batchRepo.BatchCard): batchRepo.CardAsDecided {
  return {
    id: card.id,
    status: card.status,
    clientDisabled: card.client_disabled,
    balanceCents: card.balance_cents,
    heldCents: card.held_cents,
    owedCents: card.owed_cents,
  };
}

function planUnknownCard(batch: batchRepo.AuthorizationBatch, message: CardMessage): MessageAnswer {
  const answer = answerOf(message, { result: "DECLINED", reason: "UNKNOWN_CARD", approved: 0n });
  batch.messages.push(messageRow(message, null, null, message.amountCents ?? 0n, null, answer));
  return answer;
}

/** What the batch's approvals add to each card's spending: every window of now counts them. */
function spendingOfBatch(rows: batchRepo.BatchAuthorization[]): SpendingDelta[] {
  const byCard = new Map<string, SpendingDelta>();
  for (const row of rows) {
    if (row.authorized_cents <= 0n || row.status === "DECLINED") continue;
    let delta = byCard.get(row.card_id);
    if (!delta) {
      delta = { cardId: row.card_id, cents: zeroCents(), count: zeroCounts() };
      byCard.set(row.card_id, delta);
    }
    for (const window of ["DAY", "WEEK", "MONTH", "YEAR", "LIFETIME"] as const) {
      delta.cents[window] += row.authorized_cents;
      delta.count[window] += 1;
    }
  }
  return [...byCard.values()];
}

function planOne(
  batch: batchRepo.AuthorizationBatch,
  message: CardMessage,
  card: batchRepo.BatchCard,
  where: {
    shard: string;
    settings: PurchaseSettings;
    controls: readonly Control[];
    endpoint: EffectiveEndpoint | undefined;
  },
): { answer: MessageAnswer; awaiting?: AwaitingDecision } {
  const asked = message.amountCents ?? 0n;
  const { reason, approved } = decide(card, message, {
    controls: where.controls,
    spending: card.spending,
    verification: message.verification,
  });
  const status = reason !== null ? "DECLINED" : approved > 0n ? "PENDING" : "VOIDED";
  // The client decides what Emisor approved (a hold); the hold is taken first, so the balance
  // cannot be spent twice while it decides.
  const asks = status === "PENDING" && where.endpoint !== undefined;
  const row = authorizationRow(message, card, { status, reason, approved, ...where, awaiting: asks });
  let entryId: string | null = null;
  if (status === "PENDING") {
    entryId = timeOrderedUuid();
    batch.entries.push({
      id: entryId,
      kind: "CARD_HOLD",
      description: message.merchant?.name ?? "Card purchase",
      clientId: card.client_id,
      metadata: { authorization_id: row.id, message_id: message.messageId },
      postings: [
        { accountId: card.id, amountCents: -approved },
        { accountId: systemAccounts.cardHolds, amountCents: approved },
      ],
    });
    card.balance_cents -= approved;
    card.held_cents += approved;
    addSpend(card.spending, approved);
  }
  batch.authorizations.push(row);
  const full = { ...row, force_post: false, cleared_cents: 0n, decision_metadata: null };
  // An authorization the client is asked about is created (its event) once it decided.
  if (!asks) batch.events.push(outboxRow(authorizationEvent("card_authorization.created", full)));
  const answer = answerOf(message, {
    result: reason === null ? "APPROVED" : "DECLINED",
    reason,
    approved,
    row,
    card,
  });
  const amount = reason === null ? approved : asked;
  batch.messages.push(messageRow(message, card, row.id, amount, entryId, asks ? null : answer));
  if (!asks || !where.endpoint) return { answer };
  return { answer, awaiting: awaitingOf(message, card, full, answer, where.endpoint) };
}

function authorizationRow(
  message: CardMessage,
  card: batchRepo.BatchCard,
  decision: {
    status: "PENDING" | "VOIDED" | "DECLINED";
    reason: string | null;
    approved: bigint;
    shard: string;
    settings: PurchaseSettings;
    awaiting: boolean;
  },
): batchRepo.BatchAuthorization {
  const now = new Date();
  const pending = decision.status === "PENDING";
  const days = holdDaysFor(message.merchant?.mcc ?? "0000", decision.settings);
  return {
    id: timeOrderedUuid(),
    card_id: card.id,
    client_id: card.client_id,
    status: decision.status,
    currency: message.currency,
    merchant_amount: message.merchantAmount,
    requested_cents: message.amountCents ?? 0n,
    authorized_cents: decision.approved,
    held_cents: pending ? decision.approved : 0n,
    authorization_code: decision.reason === null ? authorizationCode() : null,
    decline_reason: decision.reason,
    channel: message.channel,
    partial_allowed: message.partialAllowed,
    merchant: message.merchant ?? {},
    mcc: message.merchant?.mcc ?? "0000",
    hold_account_id: pending ? decision.shard : null,
    expires_at: pending ? new Date(now.getTime() + days * 86_400_000) : null,
    created_at: now,
    updated_at: now,
    decision: decision.awaiting ? "AWAITING" : null,
  };
}

function answerOf(
  message: CardMessage,
  outcome: {
    result: "APPROVED" | "DECLINED";
    reason: string | null;
    approved: bigint;
    row?: Pick<AuthorizationRow, "id" | "authorization_code">;
    card?: batchRepo.BatchCard;
  },
): MessageAnswer {
  const card = outcome.card;
  return {
    message_id: message.messageId,
    type: message.type,
    result: outcome.result,
    authorization_id: outcome.row?.id ?? null,
    authorization_code: outcome.result === "APPROVED" ? (outcome.row?.authorization_code ?? null) : null,
    decline_reason: outcome.reason,
    amount: Number(outcome.approved),
    partial: outcome.result === "APPROVED" && outcome.approved < (message.amountCents ?? 0n),
    over_tolerance: false,
    balance: card
      ? { available: Number(spendable(card)), held: Number(card.held_cents), owed: Number(card.owed_cents) }
      : null,
  };
}

function messageRow(
  message: CardMessage,
  card: batchRepo.BatchCard | null,
  authorizationId: string | null,
  amountCents: bigint,
  entryId: string | null,
  answer: MessageAnswer | null,
): batchRepo.MessageRow {
  return {
    messageId: message.messageId,
    cardId: card?.id ?? null,
    clientId: card?.client_id ?? null,
    authorizationId,
    amountCents,
    entryId,
    merchant: message.merchant,
    response: answer,
  };
}
