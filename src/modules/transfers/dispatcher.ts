import { BatchQueue } from "../../db/batch-queue.ts";
import type { Db } from "../../db/database.ts";
import { postponeRailJob, type RailJob, retryRailJobLater } from "../../db/rail-outbox.ts";
import { accountTypeCodes } from "../../domain/spei.ts";
import { limits } from "../../limits.ts";
import {
  RailUnavailableError,
  type SpeiOrderMessage,
  type SpeiRail,
  type SubmitResult,
} from "../../rails/spei/port.ts";
import { withDeadline } from "../../rails/timeout.ts";
import { firstCharacters } from "../../text.ts";
import { railBeneficiaryAccount } from "./beneficiary-card.ts";
import { type AcceptedOrder, claimOrders, completeJobs, recordAccepted } from "./order-batches.ts";
import { applyStateChangeTx } from "./outgoing.ts";
import * as repo from "./repository.ts";

/**
 * Hands queued transfer-out orders to the SPEI rail. One pass claims due outbox jobs a few at a
 * time (FOR UPDATE SKIP LOCKED, leased, with their orders), sends them at once outside any
 * transaction, and records the answers (the accepted ones in one statement):
 * - accepted -> ENVIADA;
 * - refused -> CANCELADA with a full refund, unless the order is ENVIADA already (accepted before:
 *   a refusal of the re-send, such as a participant's "duplicate tracking key", cancels nothing;
 *   the order waits for the next settlement check, the refusal logged and kept as the job's last
 *   error);
 * - no answer -> retried later with backoff, never dropped (the rail may have taken it; re-sending
 *   is safe because the rail deduplicates by tracking key).
 *
 * A crash between the order's commit and this hand-over leaves the job in the outbox; a crash
 * after the rail accepted but before ENVIADA was recorded makes the job due again when its lease
 * ends, and the re-send gets the rail's first answer.
 *
 * The job lives until the order is settled, returned or cancelled (the state change deletes
 * it): an order still ENVIADA when the settlement check comes due is sent again. A rail that
 * knows it answers as before; one that lost it (a simulator after a restart) takes it anew, so
 * no order stays in flight forever.
 */
export interface SpeiDispatchDeps {
  db: Db;
  rail: SpeiRail;
  /** Opens a beneficiary's sealed card number for the rail. */
  vaultKey: Buffer;
  /** Where a failed attempt is reported (never with personal data). */
  warn?: (message: string, detail: Record<string, unknown>) => void;
  /** Orders claimed and handed over at once (default `limits.railDispatchConcurrency`). */
  lanes?: number;
}

/**
 * One pass: up to `batch` jobs, claimed and sent a few at a time (the rail deduplicates each order
 * by its tracking key, so they are independent); returns how many jobs it claimed. Each chunk is
 * claimed just before it is sent, so its lease covers its rail calls.
 */
export async function dispatchSpeiOrders(
  deps: SpeiDispatchDeps,
  batch: number = limits.railBatchSize,
): Promise<number> {
  const lanes = deps.lanes ?? limits.railDispatchConcurrency;
  let claimed = 0;
  while (claimed < batch) {
    const chunk = await claimOrders(deps.db, Math.min(lanes, batch - claimed), limits.railLeaseSeconds);
    claimed += chunk.jobs.length;
    await dispatchChunk(deps, chunk.jobs, chunk.orders);
    if (chunk.jobs.length < lanes) break;
  }
  return claimed;
}

/**
 * Orders handed to the rail by the process that wrote them, right after their batch commits,
 * instead of at the dispatcher's next pass: the batch wrote their jobs leased to this process (as
 * a claim leases them), so no claim runs and no other worker sends them meanwhile. What happens
 * next is a pass's (accepted, refused, no answer). A crash after the commit leaves the jobs
 * leased, due again when the lease ends. At most `max` orders are on their way at once; a batch
 * that finds no room writes its jobs due at once, for the passes.
 */
export class SpeiHandOver {
  readonly #deps: SpeiDispatchDeps;
  readonly #max: number;
  readonly #running = new Set<Promise<void>>();
  /**
   * Acceptances of several batches' hand-overs, gathered for `speiAcceptedRecordMs` and recorded
   * in one statement: an order the rail took is ENVIADA a moment later.
   */
  readonly #accepted: BatchQueue<AcceptedOrder[], void>;
  #reserved = 0;
  #stopped = false;

  constructor(deps: SpeiDispatchDeps, max: number = limits.speiHandOverMax) {
    this.#deps = deps;
    this.#max = max;
    this.#accepted = new BatchQueue(
      Math.max(1, max),
      async (queued) => {
        await recordAccepted(
          deps.db,
          queued.flatMap(({ item }) => item),
          limits.speiSettlementCheckSeconds,
        );
        for (const { resolve } of queued) resolve();
      },
      limits.speiAcceptedRecordMs,
    );
  }

  /** Room for `orders` more, taken until `start` or `release` gives it back; false when full or stopped. */
  reserve(orders: number): boolean {
    if (this.#stopped || this.#reserved + orders > this.#max) return false;
    this.#reserved += orders;
    return true;
  }

  /** Gives back room reserved for a batch that was not written. */
  release(orders: number): void {
    this.#reserved -= orders;
  }

  /** Hands the jobs' orders over in the background; their room is given back once answered. */
  start(jobs: RailJob[], orders: Map<string, repo.SpeiOrderRow>, reserved: number): void {
    const run = dispatchChunk(this.#deps, jobs, orders, (accepted) =>
      accepted.length > 0 ? this.#accepted.submit(accepted) : Promise.resolve(),
    )
      .catch((error: unknown) =>
        this.#deps.warn?.("SPEI hand-over failed; the orders go at their lease's end", {
          orders: jobs.length,
          error: error instanceof Error ? error.message : String(error),
        }),
      )
      .finally(() => {
        this.#reserved -= reserved;
        this.#running.delete(run);
      });
    this.#running.add(run);
  }

  /** Takes no more, and waits for the hand-overs on their way. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all([...this.#running]);
  }
}

type Sent = { job: RailJob; order: repo.SpeiOrderRow; result: SubmitResult };

/** Records what the rail accepted, in one statement. */
type RecordAccepted = (accepted: AcceptedOrder[]) => Promise<void>;

/** Sends claimed orders at once, and records what the rail accepted (`record`: in one statement). */
async function dispatchChunk(
  deps: SpeiDispatchDeps,
  jobs: RailJob[],
  orders: Map<string, repo.SpeiOrderRow>,
  record: RecordAccepted = (accepted) => recordAccepted(deps.db, accepted, limits.speiSettlementCheckSeconds),
): Promise<void> {
  const inFlight = (job: RailJob) => {
    const status = orders.get(job.refId)?.status;
    return status === "PENDIENTE" || status === "ENVIADA";
  };
  await completeJobs(
    deps.db,
    jobs.filter((job) => !inFlight(job)).map((job) => job.refId),
  );
  const sent = await Promise.all(
    jobs.filter(inFlight).map((job) => sendOne(deps, job, orders.get(job.refId) as repo.SpeiOrderRow)),
  );
  const answered = sent.filter((s): s is Sent => s !== undefined);
  await record(
    answered.flatMap(({ job, order, result }) =>
      result.accepted ? [{ job, orderId: order.id, railReference: result.railReference }] : [],
    ),
  );
  for (const refused of answered) if (!refused.result.accepted) await recordRefusal(deps, refused);
}

/** Hands one order to the rail; undefined when it did not answer (the job is retried later). */
async function sendOne(
  deps: SpeiDispatchDeps,
  job: RailJob,
  order: repo.SpeiOrderRow,
): Promise<Sent | undefined> {
  try {
    const result = await withDeadline(
      deps.rail.submitOrder(messageOf(order, deps.vaultKey)),
      limits.railCallTimeoutMs,
      () => new RailUnavailableError("SPEI rail did not answer in time"),
    );
    return { job, order, result };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    deps.warn?.("SPEI order hand-over failed; will retry", {
      order_id: order.id,
      attempts: job.attempts,
      error: message,
    });
    await retryRailJobLater(deps.db, job, message, {
      baseSeconds: limits.railRetryBaseSeconds,
      maxSeconds: limits.railRetryMaxSeconds,
    });
    return undefined;
  }
}

/**
 * The rail refused an order. Never accepted: cancelled with a full refund, which completes the
 * job. Accepted earlier (a re-send at the settlement check, or after a lost record): a refusal now
 * (a participant's "duplicate tracking key") says nothing about the order, which may still settle;
 * cancelling would refund money the rail may still pay out, so it waits for the next check. A
 * settled or returned order (its callback won the race) is left as it is.
 */
async function recordRefusal(deps: SpeiDispatchDeps, { job, order, result }: Sent): Promise<void> {
  if (result.accepted) return;
  const refusedInFlight = await deps.db.transaction().execute(async (tx) => {
    const locked = await repo.lockOrderByTrackingKey(tx, order.operation_date, order.tracking_key);
    if (!locked) return false;
    if (locked.status === "ENVIADA") {
      await postponeRailJob(tx, job, limits.speiSettlementCheckSeconds, `refused: ${result.detail}`);
      return true;
    }
    await applyStateChangeTx(tx, locked, {
      trackingKey: order.tracking_key,
      operationDate: order.operation_date,
      estado: "CANCELACION",
      detalle: result.detail,
    });
    return false;
  });
  if (refusedInFlight)
    deps.warn?.("SPEI rail refused an order it had accepted; kept ENVIADA until the next settlement check", {
      order_id: order.id,
      attempts: job.attempts,
      detail: firstCharacters(result.detail, limits.railDetailLengthMax),
    });
}

function messageOf(order: repo.SpeiOrderRow, vaultKey: Buffer): SpeiOrderMessage {
  return {
    trackingKey: order.tracking_key,
    operationDate: order.operation_date,
    amountCents: BigInt(order.amount_cents),
    beneficiaryAccount: railBeneficiaryAccount(vaultKey, order),
    beneficiaryAccountType: accountTypeCodes[order.beneficiary_account_type],
    beneficiaryInstitution: order.beneficiary_institution,
    beneficiaryName: order.beneficiary_name,
    beneficiaryRfcCurp: order.beneficiary_rfc_curp,
    paymentConcept: order.payment_concept,
    numericReference: order.numeric_reference,
  };
}
