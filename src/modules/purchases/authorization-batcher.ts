import { BatchQueue, type Queued } from "../../db/batch-queue.ts";
import type { Db } from "../../db/database.ts";
import { batchWroteNothing } from "../../db/failures.ts";
import { postingShardOf, systemAccounts } from "../../ledger/accounts.ts";
import { timeOrderedUuid } from "../../ledger/ids.ts";
import { limits } from "../../limits.ts";
import { outboxRow } from "../events/outbox.ts";
import { authorizationCode, decide } from "./authorize.ts";
import * as batchRepo from "./batch-repository.ts";
import { spendable } from "./card-money.ts";
import { authorizationEvent, type CardMessage, holdDaysFor, type PurchaseSettings } from "./message.ts";
import type { AuthorizationRow } from "./repository.ts";
import { type MessageAnswer, type Processed, processMessage } from "./service.ts";

/**
 * Authorizations are the network's hot path: every purchase asks one, and the network waits. Like
 * payments, they queue per process and go in batches: a batch reads its cards (no locks), decides
 * every authorization in arrival order against each card's running balance, and writes them all in
 * ONE statement that re-checks, under the ledger's locks, what the decisions rested on (the card
 * still ACTIVE, its clients enabled, what it owes unchanged, its balance covering its holds) or
 * writes nothing. Then, or when a message id was taken meanwhile, each message of the batch runs on
 * its own through processMessage, which decides under the card's lock. A card's messages always go
 * to the same lane, so two batches of this process never race for one card.
 */
export class AuthorizationBatcher {
  readonly #db: Db;
  readonly #settings: PurchaseSettings;
  readonly #lanes: BatchQueue<CardMessage, Processed>[];
  readonly #observe: (form: "at_once" | "one_by_one") => void;

  constructor(
    db: Db,
    settings: PurchaseSettings,
    observe: (form: "at_once" | "one_by_one") => void = () => {},
    lanes = limits.authorizationBatchLanes,
  ) {
    this.#db = db;
    this.#settings = settings;
    this.#observe = observe;
    this.#lanes = Array.from(
      { length: lanes },
      () =>
        new BatchQueue<CardMessage, Processed>(limits.authorizationBatchMax, (batch) => this.#write(batch)),
    );
  }

  submit(message: CardMessage): Promise<Processed> {
    const key = message.card ? ("id" in message.card ? message.card.id : message.card.fingerprint) : "";
    let hash = 0;
    for (let i = 0; i < key.length; i++) hash = (hash * 31 + key.charCodeAt(i)) | 0;
    const lane = this.#lanes[Math.abs(hash) % this.#lanes.length];
    if (!lane) throw new Error("no authorization lane");
    return lane.submit(message);
  }

  async #write(batch: Queued<CardMessage, Processed>[]): Promise<void> {
    const messages = batch.map((queued) => queued.item);
    const ids = messages.map((m) => m.messageId);
    const refs = messages.flatMap((m) => (m.card ? [m.card] : []));
    const [cards, answered] = await Promise.all([
      batchRepo.readBatchCards(
        this.#db,
        refs.flatMap((ref) => ("id" in ref ? [ref.id] : [])),
        refs.flatMap((ref) => ("fingerprint" in ref ? [ref.fingerprint] : [])),
      ),
      batchRepo.answeredMessages(this.#db, ids),
    ]);
    const seen = new Set<string>();
    const planned: Queued<CardMessage, Processed>[] = [];
    const alone: Queued<CardMessage, Processed>[] = [];
    for (const queued of batch) {
      const stored = answered.get(queued.item.messageId);
      if (stored !== undefined) queued.resolve({ answer: stored as MessageAnswer, replayed: true });
      else if (seen.has(queued.item.messageId)) alone.push(queued);
      else {
        seen.add(queued.item.messageId);
        planned.push(queued);
      }
    }
    await this.#writePlanned(planned, cards);
    await this.#oneByOne(alone);
  }

  async #writePlanned(
    planned: Queued<CardMessage, Processed>[],
    cards: batchRepo.BatchCard[],
  ): Promise<void> {
    if (planned.length === 0) return;
    const plan = planBatch(
      planned.map((queued) => queued.item),
      cards,
      this.#settings,
    );
    try {
      await batchRepo.writeAuthorizationsAtOnce(this.#db, plan.batch);
    } catch (error) {
      if (!batchWroteNothing(error)) {
        for (const queued of planned) queued.reject(error);
        return;
      }
      this.#observe("one_by_one");
      await this.#oneByOne(planned);
      return;
    }
    this.#observe("at_once");
    planned.forEach((queued, i) => {
      const answer = plan.answers[i];
      if (answer) queued.resolve({ answer, replayed: false });
      else queued.reject(new Error("no answer planned for an authorization"));
    });
  }

  /** Each message on its own, in arrival order: the path that decides under the card's lock. */
  async #oneByOne(items: Queued<CardMessage, Processed>[]): Promise<void> {
    for (const queued of items) {
      try {
        queued.resolve(await processMessage(this.#db, queued.item, this.#settings));
      } catch (error) {
        queued.reject(error);
      }
    }
  }
}

/**
 * The batch decided: each message in arrival order against its card's running state (the same
 * decision `authorize` takes under lock), with the rows, entries, events and answers to write.
 */
export function planBatch(
  messages: CardMessage[],
  cards: batchRepo.BatchCard[],
  settings: PurchaseSettings,
): { batch: batchRepo.AuthorizationBatch; answers: MessageAnswer[] } {
  const byRef = new Map<string, batchRepo.BatchCard>();
  for (const card of cards) {
    const state = { ...card };
    byRef.set(card.id, state);
    byRef.set(card.pan_fingerprint, state);
  }
  const shard = postingShardOf(systemAccounts.cardHolds);
  const batch: batchRepo.AuthorizationBatch = {
    approvedCards: [],
    entries: [],
    holdShard: { account: systemAccounts.cardHolds, shard },
    authorizations: [],
    messages: [],
    events: [],
  };
  const approved = new Map<string, bigint>();
  const answers = messages.map((message) => {
    const ref = message.card ? ("id" in message.card ? message.card.id : message.card.fingerprint) : "";
    const card = byRef.get(ref);
    if (!card) return planUnknownCard(batch, message);
    const planned = planOne(batch, message, card, { shard, settings });
    if (planned.approvedCents > 0n) approved.set(card.id, card.owed_cents);
    return planned.answer;
  });
  batch.approvedCards = [...approved].map(([id, owedCents]) => ({ id, owedCents }));
  return { batch, answers };
}

function planUnknownCard(batch: batchRepo.AuthorizationBatch, message: CardMessage): MessageAnswer {
  const answer = answerOf(message, { result: "DECLINED", reason: "UNKNOWN_CARD", approved: 0n });
  batch.messages.push(messageRow(message, null, null, message.amountCents ?? 0n, null, answer));
  return answer;
}

function planOne(
  batch: batchRepo.AuthorizationBatch,
  message: CardMessage,
  card: batchRepo.BatchCard,
  where: { shard: string; settings: PurchaseSettings },
): { answer: MessageAnswer; approvedCents: bigint } {
  const asked = message.amountCents ?? 0n;
  const { reason, approved } = decide(card, message);
  const now = new Date();
  const status = reason !== null ? "DECLINED" : approved > 0n ? "PENDING" : "VOIDED";
  const days = holdDaysFor(message.merchant?.mcc ?? "0000", where.settings);
  const row: Omit<AuthorizationRow, "force_post" | "cleared_cents"> = {
    id: timeOrderedUuid(),
    card_id: card.id,
    client_id: card.client_id,
    status,
    currency: message.currency,
    merchant_amount: message.merchantAmount,
    requested_cents: asked,
    authorized_cents: approved,
    held_cents: status === "PENDING" ? approved : 0n,
    authorization_code: reason === null ? authorizationCode() : null,
    decline_reason: reason,
    channel: message.channel,
    partial_allowed: message.partialAllowed,
    merchant: message.merchant ?? {},
    mcc: message.merchant?.mcc ?? "0000",
    hold_account_id: status === "PENDING" ? where.shard : null,
    expires_at: status === "PENDING" ? new Date(now.getTime() + days * 86_400_000) : null,
    created_at: now,
    updated_at: now,
  };
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
  }
  batch.authorizations.push(row);
  batch.events.push(
    outboxRow(
      authorizationEvent("card_authorization.created", { ...row, force_post: false, cleared_cents: 0n }),
    ),
  );
  const answer = answerOf(message, {
    result: reason === null ? "APPROVED" : "DECLINED",
    reason,
    approved,
    row,
    card,
  });
  batch.messages.push(messageRow(message, card, row.id, reason === null ? approved : asked, entryId, answer));
  return { answer, approvedCents: status === "PENDING" ? approved : 0n };
}

function answerOf(
  message: CardMessage,
  outcome: {
    result: "APPROVED" | "DECLINED";
    reason: string | null;
    approved: bigint;
    row?: { id: string; authorization_code: string | null };
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
  answer: MessageAnswer,
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
