import type { AppContext } from "./context.ts";
import { purgeIdempotencyKeys } from "./idempotency/store.ts";
import { limits } from "./limits.ts";
import { processPendingTopups } from "./modules/airtime/worker.ts";
import { recoverAbandonedDecisions } from "./modules/purchases/decision-recovery.ts";
import { expireHolds, repayOwingCards } from "./modules/purchases/expiry.ts";
import { purchaseSettings } from "./modules/purchases/service.ts";
import { dispatchSpeiOrders, SpeiHandOver } from "./modules/transfers/dispatcher.ts";

/**
 * Background workers of one process (EMISOR_WORKERS=true): the SPEI dispatcher (and the hand-over
 * of this process's new orders as soon as their batch commits), the airtime
 * recovery, the release of expired card holds, the stand-in of client decisions whose process
 * stopped, the repayment of what cards owe and the purge of expired idempotency keys. Each is a loop of passes; a pass that found a full batch runs again at
 * once, an idle one waits (`railPollIntervalMs` for the rails and cards,
 * `idempotencyPurgeIntervalMs` for the purge). The rail passes claim their work with FOR UPDATE
 * SKIP LOCKED, and the card passes are safe twice over (an expiry is a message with its own id, a
 * repayment moves what is owed under the card's lock, a stand-in records only a decision still
 * AWAITING), so any number of processes can run them on
 * one database. stop() waits for the pass in flight.
 */
export interface Workers {
  stop(): Promise<void>;
}

export interface WorkerLog {
  warn(detail: Record<string, unknown>, message: string): void;
  error(detail: Record<string, unknown>, message: string): void;
}

export function startWorkers(ctx: AppContext, log: WorkerLog): Workers {
  const warn = (message: string, detail: Record<string, unknown>) => log.warn(detail, message);
  const spei = { db: ctx.db, rail: ctx.rails.spei, vaultKey: ctx.keys.vault, warn };
  const handOver = new SpeiHandOver(spei);
  ctx.transferBatcher.handOverWith(handOver);
  const loops = [
    loop("spei-dispatch", () => dispatchSpeiOrders(spei), log),
    loop(
      "airtime-recovery",
      () => processPendingTopups({ db: ctx.db, provider: ctx.rails.airtime, warn }),
      log,
    ),
    loop("hold-expiry", () => expireHolds(ctx.db, purchaseSettings(ctx), limits.holdExpiryBatch), log, {
      batch: limits.holdExpiryBatch,
      idleMs: limits.railPollIntervalMs,
    }),
    loop("decision-recovery", () => recoverAbandonedDecisions(ctx.db, limits.holdExpiryBatch), log, {
      batch: limits.holdExpiryBatch,
      idleMs: limits.railPollIntervalMs,
    }),
    loop("debt-repayment", () => repayOwingCards(ctx.db, limits.holdExpiryBatch), log, {
      batch: limits.holdExpiryBatch,
      idleMs: limits.railPollIntervalMs,
    }),
    // Bounded batches: each delete is short and holds few row locks; a backlog (the first start
    // after an upgrade) is worked off one batch per turn of the event loop.
    loop("idempotency-purge", () => purgeIdempotencyKeys(ctx.db, limits.idempotencyPurgeBatch), log, {
      batch: limits.idempotencyPurgeBatch,
      idleMs: limits.idempotencyPurgeIntervalMs,
    }),
  ];
  return {
    stop: async () => {
      ctx.transferBatcher.handOverWith(undefined);
      await Promise.all([handOver.stop(), ...loops.map((l) => l.stop())]);
    },
  };
}

function loop(
  name: string,
  pass: () => Promise<number>,
  log: WorkerLog,
  pace: { batch: number; idleMs: number } = {
    batch: limits.railBatchSize,
    idleMs: limits.railPollIntervalMs,
  },
): Workers {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const tick = async () => {
    let busy = false;
    try {
      busy = (await pass()) >= pace.batch;
    } catch (error) {
      log.error({ err: error, worker: name }, "worker pass failed");
    }
    if (!stopped) timer = setTimeout(run, busy ? 0 : pace.idleMs);
  };
  const run = () => {
    running = tick();
  };
  // The first pass waits for the next turn of the event loop: starting never does database work
  // synchronously, so the caller (main.ts) finishes its start-up (signal handlers) first.
  timer = setTimeout(run, 0);
  return {
    stop: async () => {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
