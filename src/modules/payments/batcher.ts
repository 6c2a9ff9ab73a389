import assert from "node:assert/strict";
import { randomInt } from "node:crypto";
import type { Db, Tx } from "../../db/database.ts";
import {
  type IdempotencyScope,
  type IdempotentResult,
  isFinalRefusal,
  refusalResponse,
} from "../../db/idempotency.ts";
import { AppError, errors } from "../../errors.ts";
import { type Envelope, ok } from "../../http/envelope.ts";
import { timeOrderedUuid } from "../../ledger/ids.ts";
import { toPesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import { maskedCardNumber } from "../cards/card-number.ts";
import { outboxRows } from "../events/outbox.ts";
import * as repo from "./repository.ts";

/**
 * The hot account. Every payment of a client debits that client's one main balance, and a row
 * lock held until commit would let only one payment per commit through. So payments queue here,
 * per process, and each transaction applies everything that queued while the previous one was
 * committing (group commit), whoever the payers are: one lock of each payer row, decisions in
 * arrival order against each payer's running balance (exactly the affordable payments succeed),
 * and two set-based statements for the whole batch. Many clients paying at once share the
 * transactions and their commits as one hot client does. Across processes the payer row locks
 * still serialise batches, and since every payment of a payer holds its lock, idempotency keys
 * checked under it cannot race. Nothing is answered before its batch commits.
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
const retryableCodes = new Set(["40P01", "40001", "23505"]);

export class PaymentBatcher {
  readonly #db: Db;
  readonly #queue: Item[] = [];
  #draining = false;

  constructor(db: Db) {
    this.#db = db;
  }

  submit(request: PaymentRequest): Promise<IdempotentResult> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ request, resolve, reject });
      if (this.#draining) return;
      this.#draining = true;
      void this.#drain();
    });
  }

  /**
   * Two batches deep: the next batch starts once the previous one has written everything and is
   * committing. It waits in the database for the payer row locks it shares with the previous one
   * and is decided the moment that commit lands, so a hot balance is never idle between batches;
   * arrival order holds because the next batch is formed only after the previous one was decided.
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
      let committing: () => void = () => {};
      const written = new Promise<void>((resolve) => {
        committing = resolve;
      });
      const settled = this.#run(batch, committing).then((outcomes) => {
        batch.forEach((item, i) => {
          const outcome = outcomes[i] ?? { error: new Error("no outcome for a payment") };
          if ("result" in outcome) item.resolve(outcome.result);
          else item.reject(outcome.error);
        });
      });
      // `last` settles when every batch so far has, so the drain ends only when none is in flight
      // (a batch that fails early must not let the drain end under one still committing).
      last = Promise.all([last, settled]).then(() => {});
      await Promise.race([written, settled]);
    }
    this.#draining = false;
  }

  /** One transaction for the batch, retried on a deadlock, a serialization failure or a key race. */
  async #run(batch: Item[], committing: () => void): Promise<Outcome[]> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#db.transaction().execute(async (tx) => {
          const outcomes = await applyBatch(
            tx,
            batch.map((i) => i.request),
          );
          committing();
          return outcomes;
        });
      } catch (error) {
        const code = (error as { code?: string }).code;
        if (attempt < 3 && code && retryableCodes.has(code)) continue;
        return batch.map(() => ({ error }));
      }
    }
  }
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

/** Decides every payment of the batch in arrival order and applies the accepted ones. */
async function applyBatch(tx: Tx, requests: PaymentRequest[]): Promise<Outcome[]> {
  const scoped = requests.flatMap((r) => (r.idempotency ? [r.idempotency] : []));
  const locked = await repo.lockBatch(
    tx,
    [...new Set(requests.map((r) => r.payerId))],
    [...new Set(requests.map((r) => r.card.id))],
    { apiKeyIds: [...new Set(scoped.map((s) => s.apiKeyId))], keys: scoped.map((s) => s.key) },
  );
  const available = locked.balances;
  const stored = new Map(locked.stored.map((row) => [`${row.api_key_id}\n${row.key}`, row]));
  const statuses = locked.statuses;
  const outcomes: Outcome[] = [];
  const firstWithKey = new Map<string, number>();
  const accepted: Array<{ index: number; payment: repo.AcceptedPayment; body: Envelope }> = [];

  requests.forEach((request, index) => {
    const scope = request.idempotency;
    const previous = scope ? stored.get(keyOf(scope)) : undefined;
    if (scope && previous) {
      outcomes[index] =
        previous.request_hash === scope.requestHash
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
    const entryId = timeOrderedUuid();
    const data = paymentData(request, entryId, status);
    const body = ok(data);
    accepted.push({
      index,
      body,
      payment: {
        entryId,
        payerId: request.payerId,
        cardId: request.card.id,
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
    });
    outcomes[index] = { result: { status: 200, body, replayed: false } };
  });

  // Every key decided here is recorded with its answer, a refusal too: a duplicate in a later
  // batch (an attempt its client gave up on) then replays it instead of paying after a "no".
  const records = [...firstWithKey.values()].flatMap((index) => {
    const scope = requests[index]?.idempotency;
    const outcome = outcomes[index];
    if (!scope || !outcome) return [];
    const response =
      "result" in outcome
        ? outcome.result
        : isFinalRefusal(outcome.error)
          ? refusalResponse(outcome.error)
          : undefined;
    return response
      ? [
          {
            apiKeyId: scope.apiKeyId,
            key: scope.key,
            requestHash: scope.requestHash,
            status: response.status,
            body: response.body,
          },
        ]
      : [];
  });
  if (accepted.length > 0 || records.length > 0) {
    const events = outboxRows(
      accepted.map((a) => ({
        type: "card.payment" as const,
        clientId: a.payment.payerId,
        data: a.body.data as Record<string, unknown>,
      })),
    );
    const written = await repo.applyPayments(
      tx,
      accepted.map((a) => a.payment),
      records,
      events,
    );
    assert.equal(written.debited, written.payers, "a locked payer balance no longer covers its payments");
    assert.equal(written.credited, written.cards, "a card has no ledger account");
  }
  return settleDuplicates(requests, outcomes, firstWithKey);
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
