import type { Db } from "../../db/database.ts";
import {
  claimRailJobs,
  completeRailJob,
  postponeRailJob,
  type RailJob,
  renewRailJob,
  retryRailJobLater,
} from "../../db/rail-outbox.ts";
import { accountTypeCodes } from "../../domain/spei.ts";
import { limits } from "../../limits.ts";
import { RailUnavailableError, type SpeiOrderMessage, type SpeiRail } from "../../rails/spei/port.ts";
import { withDeadline } from "../../rails/timeout.ts";
import { firstCharacters } from "../../text.ts";
import { railBeneficiaryAccount } from "./beneficiary-card.ts";
import { applyStateChangeTx } from "./outgoing.ts";
import * as repo from "./repository.ts";

/**
 * Hands queued transfer-out orders to the SPEI rail. One pass claims due outbox jobs (FOR UPDATE
 * SKIP LOCKED, leased; each lease renewed just before its order is sent), sends each order outside
 * any transaction, and records the answer:
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
  /** Orders of one pass handed over at once (default `limits.railDispatchConcurrency`). */
  lanes?: number;
}

/** One pass; returns how many jobs it claimed. */
export async function dispatchSpeiOrders(
  deps: SpeiDispatchDeps,
  batch: number = limits.railBatchSize,
): Promise<number> {
  const jobs = await claimRailJobs(deps.db, "SPEI", batch, limits.railLeaseSeconds);
  // Orders are independent (the rail deduplicates each by its tracking key): a few at once, so a
  // backlog drains at the rail's pace rather than one round trip after another.
  const queue = [...jobs];
  const lane = async () => {
    for (let job = queue.shift(); job; job = queue.shift()) await dispatchOne(deps, job);
  };
  await Promise.all(Array.from({ length: deps.lanes ?? limits.railDispatchConcurrency }, lane));
  return jobs.length;
}

async function dispatchOne(deps: SpeiDispatchDeps, job: RailJob): Promise<void> {
  const { db, rail } = deps;
  // The batch may have outlived the lease it was claimed with: renew it, or skip a job another
  // worker has taken over since.
  if (!(await renewRailJob(db, job, limits.railLeaseSeconds))) return;
  const order = await repo.findOrderById(db, job.refId);
  if (!order || (order.status !== "PENDIENTE" && order.status !== "ENVIADA")) {
    await completeRailJob(db, "SPEI", job.refId);
    return;
  }
  let result: Awaited<ReturnType<SpeiRail["submitOrder"]>>;
  try {
    result = await withDeadline(
      rail.submitOrder(messageOf(order, deps.vaultKey)),
      limits.railCallTimeoutMs,
      () => new RailUnavailableError("SPEI rail did not answer in time"),
    );
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    deps.warn?.("SPEI order hand-over failed; will retry", {
      order_id: order.id,
      attempts: job.attempts,
      error: message,
    });
    await retryRailJobLater(db, job, message, {
      baseSeconds: limits.railRetryBaseSeconds,
      maxSeconds: limits.railRetryMaxSeconds,
    });
    return;
  }
  const refusedInFlight = await db.transaction().execute(async (tx) => {
    const locked = await repo.lockOrderByTrackingKey(tx, order.operation_date, order.tracking_key);
    if (!locked) return false;
    if (!result.accepted) {
      if (locked.status === "ENVIADA") {
        // Accepted earlier (this is a re-send at the settlement check, or after a lost record):
        // a refusal now (a participant's "duplicate tracking key") says nothing about the order,
        // which may still settle. Cancelling would refund money the rail may still pay out.
        await postponeRailJob(tx, job, limits.speiSettlementCheckSeconds, `refused: ${result.detail}`);
        return true;
      }
      // Never accepted: cancelled with a full refund; completes the job with the state change.
      // A settled or returned order (its callback won the race) is left as it is.
      await applyStateChangeTx(tx, locked, {
        trackingKey: order.tracking_key,
        operationDate: order.operation_date,
        estado: "CANCELACION",
        detalle: result.detail,
      });
      return false;
    }
    await repo.transitionOrder(tx, order.id, ["PENDIENTE"], "ENVIADA", {
      rail_reference: result.railReference,
      sent_at: new Date(),
    });
    // A settled or returned order is done (its callback won the race); one still in flight keeps
    // its job, due again after the settlement check period.
    if (locked.status === "PENDIENTE" || locked.status === "ENVIADA") {
      await postponeRailJob(tx, job, limits.speiSettlementCheckSeconds);
    } else {
      await completeRailJob(tx, "SPEI", order.id);
    }
    return false;
  });
  if (refusedInFlight && !result.accepted)
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
