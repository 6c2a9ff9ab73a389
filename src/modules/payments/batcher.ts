import { randomInt } from "node:crypto";
import type { Db, Tx } from "../../db/database.ts";
import { decisionRefused } from "../../db/failures.ts";
import { AppError, errors } from "../../errors.ts";
import {
  type IdempotentResult,
  isFinalRefusal,
  okReply,
  refusalResponse,
  type StoredResponse,
} from "../../idempotency/reply.ts";
import { type IdempotencyRecord, type IdempotencyScope, sameRequest } from "../../idempotency/store.ts";
import { cardsToRepay, repayOwed } from "../../ledger/card-owed.ts";
import { timeOrderedUuid } from "../../ledger/ids.ts";
import { toPesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import { maskedCardNumber } from "../cards/card-number.ts";
import { type NewEvent, outboxRows } from "../events/outbox.ts";
import { BoundedMap } from "../shared/bounded-map.ts";
import * as repo from "./repository.ts";

/**
 * The hot account. Every payment of a client debits that client's one main balance, and a row
 * lock held until commit would let only one payment per commit through. So payments queue here,
 * per process, and each batch applies everything that queued while the previous one was being
 * applied (group commit), whoever the payers are. Many clients paying at once share the batches
 * and their commits as one hot client does. Nothing is answered before its batch commits.
 *
 * A batch takes one of two forms:
 * - **At once** (the common case): when what this process last saw under lock says every payment
 *   of the batch will be accepted (each payer covers its total, every card is payable, no key
 *   repeats), the batch is decided here and sent as ONE autocommit statement that checks exactly
 *   those conditions under the locks and writes everything, or raises and writes nothing. The
 *   payer rows are then held only while PostgreSQL runs the locked part and commits.
 * - **Under lock**: otherwise, or when the statement raised, one transaction locks the payer rows,
 *   decides every payment in arrival order against each payer's running balance (exactly the
 *   affordable payments succeed) and writes the batch.
 *
 * Two batches are in flight at once, so a hot payer row is handed from one commit to the next
 * without waiting for a reply. Arrival order still holds: a batch sent at once while the one before
 * it is undecided requires its payers to cover both batches' totals, so it can never take money the
 * earlier batch's payments would have had; a batch that falls back to the locked form first waits
 * until every earlier batch is decided. Across processes the payer row locks serialise batches, and
 * since every payment of a payer holds its lock, idempotency keys checked under it cannot race.
 *
 * When another process pays from the same balance (a batch finds it moved since this process last
 * saw it), batches of the processes take turns on the payer's row, and a second batch in flight
 * would only split each turn's payments in two. The batcher then sends one batch at a time and,
 * once it is answered, waits a moment for what its connections send back, so each turn carries
 * about as many payments as this process serves; alone again, it goes back to two.
 */
export interface PaymentRequest {
  payerId: string;
  apiKeyId: string;
  card: {
    id: string;
    client_id: string;
    last_four: string;
    card_type: string;
    account_id: string;
    account_reference: string;
    /** As last read (the card cache's may be stale): only a guess the batch is checked against. */
    status: string;
  };
  amountCents: bigint;
  description: string;
  latitude: number;
  longitude: number;
  idempotency: IdempotencyScope | undefined;
}

interface Item {
  request: PaymentRequest;
  resolve: (result: IdempotentResult) => void;
  reject: (error: unknown) => void;
}

type Outcome = { result: IdempotentResult } | { error: unknown };

const payableStatuses = new Set(["NEED_ACTIVATION", "ACTIVE"]);
/** Each batch's weight in the moving average of `#shared`, and the average past which it counts. */
const sharedWeight = 0.25;
const sharedAbove = 0.5;
const retryableCodes = new Set(["40P01", "40001", "23505"]);

/**
 * How a batch was applied: in one statement (`at_once`) or in a transaction under lock
 * (`under_lock`); `fell_back` counts the batches sent at once whose checks failed, which were then
 * applied under lock (and are counted there too).
 */
export type BatchForm = "at_once" | "under_lock" | "fell_back";

/** Errors after which the one-statement form is known to have written nothing. */
const rolledBackCodes = new Set([decisionRefused, "40P01", "40001", "23505"]);

export class PaymentBatcher {
  readonly #db: Db;
  readonly #queue: Item[] = [];
  #draining = false;
  /** Each payer's balance and each card's status as last seen under lock or after a debit. */
  readonly #balances = new BoundedMap<string, bigint>(limits.paymentMemory);
  readonly #statuses = new BoundedMap<string, string>(limits.paymentMemory);
  /** What batches sent and not yet settled may still take from each payer. */
  readonly #pending = new Map<string, bigint>();
  readonly #observe: (form: BatchForm, payments: number, sharing: boolean) => void;
  /**
   * How often, of late, a batch found a payer's balance moved by another writer since this process
   * last saw it (a moving average, 0 to 1): another process paying from the same balance.
   */
  #shared = 0;
  /** The drain waiting for the queue to reach a size, and how to wake it. */
  #gathering: { size: number; wake: () => void } | undefined;

  constructor(db: Db, observe: (form: BatchForm, payments: number, sharing: boolean) => void = () => {}) {
    this.#db = db;
    this.#observe = observe;
  }

  /** Whether this process's batches now take turns with another writer's on their payers' rows. */
  get sharing(): boolean {
    return this.#shared >= sharedAbove;
  }

  submit(request: PaymentRequest): Promise<IdempotentResult> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ request, resolve, reject });
      if (this.#gathering && this.#queue.length >= this.#gathering.size) this.#gathering.wake();
      if (this.#draining) return;
      this.#draining = true;
      void this.#drain();
    });
  }

  /**
   * Two batches deep: the next batch is formed once the previous one no longer needs this process
   * (sent at once, or written under lock and committing) and every batch before that one has
   * settled. It waits in the database for the payer rows the previous one holds and runs the
   * moment that commit lands, so a hot balance is never idle between batches.
   */
  async #drain(): Promise<void> {
    const queue = this.#queue;
    let last: Promise<void> = Promise.resolve();
    for (;;) {
      if (queue.length === 0) {
        await last;
        if (queue.length === 0) break;
        continue;
      }
      const batch = queue.splice(0, limits.paymentBatchMax);
      let letNextStart: () => void = () => {};
      const nextMayStart = new Promise<void>((resolve) => {
        letNextStart = resolve;
      });
      const settled = this.#run(
        batch.map((item) => item.request),
        last,
        letNextStart,
      ).then(async (outcomes) => {
        await this.#repayDebts(batch.map((item) => item.request.card.id));
        batch.forEach((item, i) => {
          const outcome = outcomes[i] ?? { error: new Error("no outcome for a payment") };
          if ("result" in outcome) item.resolve(outcome.result);
          else item.reject(outcome.error);
        });
      });
      // `last` settles when every batch so far has, so the drain ends only when none is in flight
      // (a batch that fails early must not let the drain end under one still committing).
      last = Promise.all([last, settled]).then(() => {});
      if (!this.sharing) await Promise.race([nextMayStart, settled]);
      else {
        await settled;
        await this.#gather(Math.min(batch.length + queue.length, limits.paymentBatchMax));
      }
    }
    this.#draining = false;
  }

  async #run(
    requests: PaymentRequest[],
    earlier: Promise<void>,
    letNextStart: () => void,
  ): Promise<Outcome[]> {
    const totals = totalsByPayer(requests);
    const release = this.#reserve(totals);
    try {
      const atOnce = this.#decideAtOnce(requests, totals);
      if (atOnce) {
        const sent = repo.applyPaymentsAtOnce(this.#db, atOnce.batch);
        void earlier.then(letNextStart);
        try {
          const balances = await sent;
          this.#noteShared(balances, totals);
          this.#learn(balances, atOnce.batch.statuses);
          this.#observe("at_once", requests.length, this.sharing);
          return atOnce.outcomes;
        } catch (error) {
          const code = (error as { code?: string }).code;
          // Anything else (a lost connection, a deadline) leaves the outcome unknown: deciding the
          // batch again could pay it twice, so it is answered as the error.
          if (!code || !rolledBackCodes.has(code)) return requests.map(() => ({ error }));
          this.#observe("fell_back", requests.length, this.sharing);
        }
        await earlier;
      }
      this.#observe("under_lock", requests.length, this.sharing);
      return await this.#underLock(requests, letNextStart);
    } finally {
      release();
    }
  }

  /** One transaction for the batch, retried on a deadlock, a serialization failure or a key race. */
  async #underLock(requests: PaymentRequest[], committing: () => void): Promise<Outcome[]> {
    for (let attempt = 1; ; attempt++) {
      try {
        const decided = await this.#db.transaction().execute(async (tx) => {
          const result = await applyBatch(tx, requests);
          committing();
          return result;
        });
        this.#learn(decided.balances, decided.statuses);
        return decided.outcomes;
      } catch (error) {
        const code = (error as { code?: string }).code;
        if (attempt < 3 && code && retryableCodes.has(code)) continue;
        return requests.map(() => ({ error }));
      }
    }
  }

  /**
   * Money paid onto a card that owes (a clearing it could not cover) repays the debt first: after
   * the batch commits, and before it is answered, each such card's repayment is posted. Until then
   * a purchase already counts the debt against what the card can spend. A failed repayment is left
   * for the card's next money in; the payments stand.
   */
  async #repayDebts(cardIds: string[]): Promise<void> {
    try {
      for (const cardId of await cardsToRepay(this.#db, cardIds))
        await this.#db.transaction().execute((tx) => repayOwed(tx, cardId));
    } catch {
      // The payments committed; the debt stays recorded and is repaid by the card's next money in.
    }
  }

  /**
   * Whether another writer moved a payer's balance between this process's last sight of it and
   * this batch's debit (the balance before the debit is not the one last seen). Batches that
   * follow each other in this process find it unmoved, whatever their depth.
   */
  #noteShared(after: Map<string, bigint>, totals: Map<string, bigint>): void {
    let moved: boolean | undefined;
    for (const [payer, balance] of after) {
      const seen = this.#balances.get(payer);
      if (seen !== undefined) moved = moved || seen !== balance + (totals.get(payer) ?? 0n);
    }
    if (moved !== undefined) this.#shared = this.#shared * (1 - sharedWeight) + (moved ? sharedWeight : 0);
  }

  /**
   * When the payer's row is shared with other processes, batches take turns with theirs, and one
   * batch per turn should carry what this process's connections send back once the last batch
   * is answered: it waits until that batch's size and what queued meanwhile are queued, or a
   * moment passes.
   */
  async #gather(size: number): Promise<void> {
    if (this.#queue.length >= size) return;
    await new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.#gathering = undefined;
        resolve();
      };
      const timer = setTimeout(wake, limits.paymentGatherMs);
      this.#gathering = { size, wake };
    });
  }

  #learn(balances: Map<string, bigint>, statuses: Map<string, string>): void {
    for (const [payer, balance] of balances) this.#balances.set(payer, balance);
    for (const [card, status] of statuses) this.#statuses.set(card, status);
  }

  /** Counts the batch's totals as pending until it settles; answers the release. */
  #reserve(totals: Map<string, bigint>): () => void {
    for (const [payer, total] of totals) this.#pending.set(payer, (this.#pending.get(payer) ?? 0n) + total);
    return () => {
      for (const [payer, total] of totals) {
        const left = (this.#pending.get(payer) ?? 0n) - total;
        if (left === 0n) this.#pending.delete(payer);
        else this.#pending.set(payer, left);
      }
    };
  }

  /**
   * The batch decided before its locks, when what this process knows says every payment will be
   * accepted: each payer's last seen balance covers what is pending on it (this batch included),
   * each card was last seen payable, and no key appears twice. A payer or card never seen is
   * assumed fine: the statement checks it.
   */
  #decideAtOnce(
    requests: PaymentRequest[],
    totals: Map<string, bigint>,
  ): { batch: repo.BatchAtOnce; outcomes: Outcome[] } | undefined {
    const keys = requests.flatMap((r) => (r.idempotency ? [keyOf(r.idempotency)] : []));
    if (new Set(keys).size !== keys.length) return undefined;
    const guards = new Map<string, bigint>();
    for (const payer of totals.keys()) {
      const pending = this.#pending.get(payer) ?? 0n;
      const known = this.#balances.get(payer);
      if (known !== undefined && known < pending) return undefined;
      guards.set(payer, pending);
    }
    const statuses = new Map<string, string>();
    for (const request of requests) {
      const status = this.#statuses.get(request.card.id) ?? request.card.status;
      if (!payableStatuses.has(status)) return undefined;
      statuses.set(request.card.id, status);
    }
    const accepted = requests.map((request) => accept(request, statuses.get(request.card.id) ?? ""));
    return {
      batch: {
        payments: accepted.map((a) => a.payment),
        records: requests.flatMap((request, i) => {
          const reply = accepted[i]?.reply;
          return request.idempotency && reply ? [record(request.idempotency, reply)] : [];
        }),
        events: paymentEvents(accepted),
        guards,
        statuses,
      },
      outcomes: accepted.map((a) => ({ result: { ...a.reply, replayed: false } })),
    };
  }
}

function totalsByPayer(requests: PaymentRequest[]): Map<string, bigint> {
  const totals = new Map<string, bigint>();
  for (const r of requests) totals.set(r.payerId, (totals.get(r.payerId) ?? 0n) + r.amountCents);
  return totals;
}

function authorizationCode(): string {
  return String(randomInt(0, 1_000_000)).padStart(6, "0");
}

function paymentData(request: PaymentRequest, entryId: string, status: string) {
  return {
    operation: {
      id: entryId,
      authorization_code: authorizationCode(),
      amount: toPesos(request.amountCents),
      payment_description: request.description,
    },
    card: {
      id: request.card.id,
      masked_card_number: maskedCardNumber(request.card.last_four),
      type: request.card.card_type,
      status,
    },
    account: { id: request.card.account_id, reference: Number(request.card.account_reference) },
  };
}

const keyOf = (scope: IdempotencyScope) => `${scope.apiKeyId}\n${scope.key}`;

interface Accepted {
  payment: repo.AcceptedPayment;
  /** What the payment answers, and its key stores. */
  data: Record<string, unknown>;
  reply: StoredResponse;
}

/** A payment accepted, with the card status its answer states. */
function accept(request: PaymentRequest, status: string): Accepted {
  const entryId = timeOrderedUuid();
  const data = paymentData(request, entryId, status);
  return {
    data,
    reply: okReply(data),
    payment: {
      entryId,
      payerId: request.payerId,
      cardId: request.card.id,
      cardClientId: request.card.client_id,
      amountCents: request.amountCents,
      description: request.description,
      metadata: {
        card_id: request.card.id,
        authorization_code: data.operation.authorization_code,
        latitude: request.latitude,
        longitude: request.longitude,
        api_key_id: request.apiKeyId,
      },
    },
  };
}

function record(scope: IdempotencyScope, response: StoredResponse): IdempotencyRecord {
  return { apiKeyId: scope.apiKeyId, key: scope.key, requestHash: scope.requestHash, ...response };
}

/**
 * A payment's events: `card.payment` for the payer, and `card.payment.received` for the card's
 * client when that is another (a parent paying a sub-client's card), with the same data (it
 * names the card and the operation, nothing of the payer).
 */
function paymentEvents(accepted: Accepted[]) {
  const events: NewEvent[] = [];
  for (const { payment, data } of accepted) {
    events.push({ type: "card.payment", clientId: payment.payerId, data });
    if (payment.cardClientId !== payment.payerId)
      events.push({ type: "card.payment.received", clientId: payment.cardClientId, data });
  }
  return outboxRows(events);
}

/**
 * Decides every payment of the batch in arrival order and applies the accepted ones. Answers the
 * outcomes, and each payer's balance and each card's status once the batch is applied.
 */
async function applyBatch(
  tx: Tx,
  requests: PaymentRequest[],
): Promise<{ outcomes: Outcome[]; balances: Map<string, bigint>; statuses: Map<string, string> }> {
  const scoped = requests.flatMap((r) => (r.idempotency ? [r.idempotency] : []));
  const locked = await repo.lockBatch(
    tx,
    [...new Set(requests.map((r) => r.payerId))],
    [...new Set(requests.map((r) => r.card.id))],
    { apiKeyIds: [...new Set(scoped.map((s) => s.apiKeyId))], keys: scoped.map((s) => s.key) },
  );
  if (locked.expired.length > 0) await repo.forgetExpiredKeys(tx, locked.expired);
  const available = locked.balances;
  const stored = new Map(locked.stored.map((row) => [`${row.api_key_id}\n${row.key}`, row]));
  const statuses = locked.statuses;
  const outcomes: Outcome[] = [];
  const firstWithKey = new Map<string, number>();
  const accepted: Accepted[] = [];

  requests.forEach((request, index) => {
    const scope = request.idempotency;
    const previous = scope ? stored.get(keyOf(scope)) : undefined;
    if (scope && previous) {
      outcomes[index] = sameRequest(previous.request_hash, scope)
        ? { result: { status: previous.response_status, body: previous.response_body, replayed: true } }
        : { error: new AppError(errors.idempotencyKeyReused) };
      return;
    }
    if (scope && firstWithKey.has(keyOf(scope))) {
      outcomes[index] = { error: "duplicate" }; // settled below, from the first request with the key
      return;
    }
    if (scope) firstWithKey.set(keyOf(scope), index);
    const balance = available.get(request.payerId);
    if (balance === undefined) {
      outcomes[index] = { error: new Error(`payer ${request.payerId} has no ledger account`) };
      return;
    }
    const status = statuses.get(request.card.id);
    if (!status || !payableStatuses.has(status)) {
      outcomes[index] = { error: new AppError(errors.cardNotPayable) };
      return;
    }
    if (request.amountCents > balance) {
      outcomes[index] = { error: new AppError(errors.paymentInsufficientBalance) };
      return;
    }
    available.set(request.payerId, balance - request.amountCents);
    const payment = accept(request, status);
    accepted.push(payment);
    outcomes[index] = { result: { ...payment.reply, replayed: false } };
  });

  const records = decidedRecords(requests, outcomes, firstWithKey);
  if (accepted.length > 0 || records.length > 0) {
    await repo.applyPayments(
      tx,
      accepted.map((a) => a.payment),
      records,
      paymentEvents(accepted),
    );
  }
  return { outcomes: settleDuplicates(requests, outcomes, firstWithKey), balances: available, statuses };
}

/**
 * Every key decided here is recorded with its answer, a refusal too: a duplicate in a later batch
 * (an attempt its client gave up on) then replays it instead of paying after a "no".
 */
function decidedRecords(
  requests: PaymentRequest[],
  outcomes: Outcome[],
  firstWithKey: Map<string, number>,
): IdempotencyRecord[] {
  return [...firstWithKey.values()].flatMap((index) => {
    const scope = requests[index]?.idempotency;
    const outcome = outcomes[index];
    if (!scope || !outcome) return [];
    const response =
      "result" in outcome
        ? outcome.result
        : isFinalRefusal(outcome.error)
          ? refusalResponse(outcome.error)
          : undefined;
    return response ? [record(scope, response)] : [];
  });
}

/** A repeated key inside one batch gets what the first request with that key got. */
function settleDuplicates(
  requests: PaymentRequest[],
  outcomes: Outcome[],
  firstWithKey: Map<string, number>,
): Outcome[] {
  return outcomes.map((outcome, index) => {
    if (!("error" in outcome) || outcome.error !== "duplicate") return outcome;
    const scope = requests[index]?.idempotency;
    const first = scope ? outcomes[firstWithKey.get(keyOf(scope)) ?? -1] : undefined;
    const firstScope = scope ? requests[firstWithKey.get(keyOf(scope)) ?? -1]?.idempotency : undefined;
    if (!first || !firstScope) return { error: new Error("duplicate without its first request") };
    if (firstScope.requestHash !== scope?.requestHash)
      return { error: new AppError(errors.idempotencyKeyReused) };
    return "result" in first ? { result: { ...first.result, replayed: true } } : first;
  });
}
