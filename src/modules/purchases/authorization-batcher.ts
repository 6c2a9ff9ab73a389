import { BatchQueue, type Queued } from "../../db/batch-queue.ts";
import type { Db } from "../../db/database.ts";
import { batchWroteNothing } from "../../db/failures.ts";
import { limits } from "../../limits.ts";
import type { CardRef } from "../cards/card-number.ts";
import { ControlMemory } from "../controls/memory.ts";
import { type WindowKeys, windowKeysAt } from "../controls/windows.ts";
import { BoundedMap } from "../shared/bounded-map.ts";
import { StringPool } from "../shared/string-pool.ts";
import { cardKeyOf, type PlannedBatch, planBatch } from "./authorization-plan.ts";
import * as batchRepo from "./batch-repository.ts";
import type { CardMessage, PurchaseSettings } from "./message.ts";
import { type MessageAnswer, type Processed, processMessage, undecidedAnswer } from "./service.ts";
import { spendingCopy } from "./spending.ts";

export type AuthorizationBatchForm = "at_once" | "reread" | "one_by_one";

/**
 * Authorizations are the network's hot path: every purchase asks one, and the network waits. Like
 * payments, they queue per process and go in batches, decided here and written in ONE statement
 * that re-checks under the ledger's locks what each decision rested on (each card's status, its
 * clients, its balance, what it holds and owes, exactly as decided on) or writes nothing.
 *
 * The batch decides on each card's state as this process last wrote or read it, so the common
 * batch is that one statement and nothing else. A decline is answered only on a card read for
 * this batch (the memory may be behind a payment made elsewhere). When the statement refuses
 * itself (a card changed, or a message id was answered already, by another process or long ago),
 * the batch answers the ids found answered, reads its cards and tries once more; then each message
 * runs on its own through processMessage, which decides under the card's lock. A card's messages
 * always go to the same lane, so two batches of this process never race for one card.
 */
export class AuthorizationBatcher {
  readonly #db: Db;
  readonly #settings: PurchaseSettings;
  readonly #lanes: BatchQueue<CardMessage, Processed>[];
  readonly #observe: (form: AuthorizationBatchForm) => void;
  /** Each card's state after this process's last batch on it, by id and by number's fingerprint. */
  readonly #cards = new BoundedMap<string, batchRepo.BatchCard>(limits.authorizationCardMemory);
  /** The cards' clients, products, lineages, statuses and expiries, one copy of each. */
  readonly #pool = new StringPool(limits.authorizationCardMemory);
  readonly #controls = new ControlMemory();
  /** Answers given here lately: a network's repeat of a message id is answered without a query. */
  readonly #answers = new BoundedMap<string, MessageAnswer>(limits.authorizationAnswerMemory);

  constructor(
    db: Db,
    settings: PurchaseSettings,
    observe: (form: AuthorizationBatchForm) => void = () => {},
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
    const key = cardKeyOf(message);
    let hash = 0;
    for (let i = 0; i < key.length; i++) hash = (hash * 31 + key.charCodeAt(i)) | 0;
    const lane = this.#lanes[Math.abs(hash) % this.#lanes.length];
    if (!lane) throw new Error("no authorization lane");
    return lane.submit(message);
  }

  /** Keeps an answer given here (one the client decided) for the network's repeats. */
  rememberAnswer(answer: MessageAnswer): void {
    this.#answers.set(answer.message_id, answer);
  }

  /** Forgets what this process knows of a card, after it moved the card's money another way. */
  forgetCard(cardId: string): void {
    const card = this.#cards.get(cardId);
    this.#cards.delete(cardId);
    if (card) this.#cards.delete(card.pan_fingerprint);
  }

  async #write(batch: Queued<CardMessage, Processed>[]): Promise<void> {
    const seen = new Set<string>();
    const planned: Queued<CardMessage, Processed>[] = [];
    const alone: Queued<CardMessage, Processed>[] = [];
    for (const queued of batch) {
      const id = queued.item.messageId;
      const answer = this.#answers.get(id);
      if (answer !== undefined) queued.resolve({ answer, replayed: true });
      else if (seen.has(id)) alone.push(queued);
      else {
        seen.add(id);
        planned.push(queued);
      }
    }
    if (planned.length > 0 && !(await this.#tryAtOnce(planned, false))) await this.#retry(planned);
    await this.#oneByOne(alone);
  }

  /** After a refusal: the ids answered meanwhile are answered, the rest decided on fresh reads. */
  async #retry(planned: Queued<CardMessage, Processed>[]): Promise<void> {
    for (const queued of planned) this.#forgetKey(cardKeyOf(queued.item));
    this.#controls.forget();
    const answered = await batchRepo.answeredMessages(
      this.#db,
      planned.map((queued) => queued.item.messageId),
    );
    const rest = planned.filter((queued) => {
      const stored = answered.get(queued.item.messageId);
      if (stored === null)
        queued.resolve({ answer: undecidedAnswer(queued.item), replayed: true, undecided: true });
      else if (stored !== undefined) queued.resolve({ answer: stored as MessageAnswer, replayed: true });
      return stored === undefined;
    });
    if (rest.length === 0) return;
    this.#observe("reread");
    if (await this.#tryAtOnce(rest, true)) return;
    this.#observe("one_by_one");
    for (const queued of rest) this.#forgetKey(cardKeyOf(queued.item));
    await this.#oneByOne(rest);
  }

  /**
   * Decides and writes the batch at once; false when the statement refused itself (nothing was
   * written). Cards this process does not know, and those it knew that declined, are read first.
   */
  async #tryAtOnce(planned: Queued<CardMessage, Processed>[], reread: boolean): Promise<boolean> {
    const messages = planned.map((queued) => queued.item);
    const now = windowKeysAt(Date.now());
    const states = await this.#statesOf(messages, reread ? new Set(messages.map(cardKeyOf)) : undefined, now);
    let plan = await this.#plan(messages, states, now);
    const stale = new Set([...plan.declinedCards].filter((id) => !states.fresh.has(id)));
    if (stale.size > 0) {
      const keys = new Set(
        messages.map(cardKeyOf).filter((key) => stale.has(states.byKey.get(key)?.id ?? "")),
      );
      plan = await this.#plan(messages, await this.#statesOf(messages, keys, now, states), now);
    }
    try {
      await batchRepo.writeAuthorizationsAtOnce(this.#db, plan.batch);
    } catch (error) {
      if (batchWroteNothing(error)) return false;
      for (const queued of planned) queued.reject(error);
      return true;
    }
    this.#remember(plan);
    if (!reread) this.#observe("at_once");
    planned.forEach((queued, i) => {
      const answer = plan.answers[i];
      if (answer) queued.resolve({ answer, replayed: false, awaiting: plan.awaiting.get(i) });
      else queued.reject(new Error("no answer planned for an authorization"));
    });
    return true;
  }

  /** The batch decided on `states`, with the spending controls of each card. */
  async #plan(messages: CardMessage[], states: CardStates, now: WindowKeys): Promise<PlannedBatch> {
    const cards = copies(states, now);
    const distinct = [...new Map([...cards.values()].map((card) => [card.id, card])).values()];
    const [controls, endpoints] = await Promise.all([
      this.#controls.controlsFor(this.#db, distinct),
      this.#settings.endpoints?.forClients(distinct.map((card) => card.client_id)) ?? new Map(),
    ]);
    return planBatch(messages, cards, {
      settings: this.#settings,
      controls,
      now,
      generation: this.#controls.generation,
      endpoints,
    });
  }

  /**
   * The state of each card the messages name: remembered, or read (the cards `read` names, and
   * every card not remembered). `fresh` holds the ids of the cards read now.
   */
  async #statesOf(
    messages: CardMessage[],
    read: Set<string> | undefined,
    now: WindowKeys,
    known?: CardStates,
  ): Promise<CardStates> {
    const byKey = new Map(known?.byKey ?? []);
    const fresh = new Set(known?.fresh ?? []);
    const toRead = new Map<string, CardRef>();
    for (const message of messages) {
      const key = cardKeyOf(message);
      const remembered = read?.has(key) ? undefined : (byKey.get(key) ?? this.#cards.get(key));
      if (remembered) byKey.set(key, remembered);
      else if (message.card) toRead.set(key, message.card);
    }
    if (toRead.size === 0) return { byKey, fresh };
    const refs = [...toRead.values()];
    for (const key of toRead.keys()) byKey.delete(key);
    const rows = await batchRepo.readBatchCards(
      this.#db,
      refs.flatMap((ref) => ("id" in ref ? [ref.id] : [])),
      refs.flatMap((ref) => ("fingerprint" in ref ? [ref.fingerprint] : [])),
      now,
    );
    for (const row of rows) {
      const card = this.#pooled(row);
      fresh.add(card.id);
      byKey.set(card.id, card);
      byKey.set(card.pan_fingerprint, card);
    }
    return { byKey, fresh };
  }

  /** Keeps each card's state after the batch, and each answer, for the batches that follow. */
  #remember(plan: PlannedBatch): void {
    for (const card of plan.decided.values()) {
      this.#cards.set(card.id, card);
      this.#cards.set(card.pan_fingerprint, card);
    }
    // An answer the client has yet to decide on is not the answer: its repeats find the message row.
    plan.answers.forEach((answer, i) => {
      if (!plan.awaiting.has(i)) this.#answers.set(answer.message_id, answer);
    });
  }

  /** A card as read, its repeated values shared with the other cards this process keeps. */
  #pooled(card: batchRepo.BatchCard): batchRepo.BatchCard {
    const pool = this.#pool;
    card.client_id = pool.string(card.client_id);
    card.product_id = pool.string(card.product_id);
    card.lineage = pool.list(card.lineage);
    card.status = pool.string(card.status);
    card.expires_on = pool.string(card.expires_on);
    return card;
  }

  #forgetKey(key: string): void {
    const card = this.#cards.get(key);
    if (card) this.forgetCard(card.id);
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

interface CardStates {
  /** A card's state by each key a message may name it by (its id, its number's fingerprint). */
  byKey: Map<string, batchRepo.BatchCard>;
  fresh: Set<string>;
}

/**
 * The states a plan may change, one copy per card whichever key names it, its spending moved on
 * to the windows of `now`.
 */
function copies(states: CardStates, now: WindowKeys): Map<string, batchRepo.BatchCard> {
  const byId = new Map<string, batchRepo.BatchCard>();
  const byKey = new Map<string, batchRepo.BatchCard>();
  for (const [key, card] of states.byKey) {
    let copy = byId.get(card.id);
    if (!copy) {
      copy = { ...card, spending: spendingCopy(card.spending, now) };
      byId.set(card.id, copy);
    }
    byKey.set(key, copy);
  }
  return byKey;
}
