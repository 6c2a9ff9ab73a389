import type { Db } from "../../db/database.ts";
import { decisionRefused } from "../../db/failures.ts";
import type { IdempotentResult } from "../../db/idempotency.ts";
import { limits } from "../../limits.ts";
import { type BatchedTransfer, writeTransfersAtOnce } from "./batch-repository.ts";

/**
 * Transfers out, batched. Each transfer on its own would be a transaction of several statements,
 * and on this path the round trips, not the work, are the cost. So transfers decided at the same
 * moment (card, PIN, commission, balance as just read) queue here, per process, and each batch
 * writes everything that queued while the previous one was being written, as ONE statement
 * (`writeTransfersAtOnce`) that checks under lock what every transfer was decided on. When a check
 * fails the statement writes nothing, and each transfer of the batch runs on its own (`alone`),
 * which answers its own refusal or success; the next batch waits for them, so transfers of one
 * card keep their order.
 */
export interface TransferJob {
  transfer: BatchedTransfer;
  /** The answer once the batch is written. */
  answer: IdempotentResult;
  /** The transfer in a transaction of its own. */
  alone: () => Promise<IdempotentResult>;
}

interface Item {
  job: TransferJob;
  resolve: (result: IdempotentResult) => void;
  reject: (error: unknown) => void;
}

/** Errors after which the statement is known to have written nothing. */
const rolledBackCodes = new Set([decisionRefused, "40P01", "40001", "23505"]);

export type TransferBatchForm = "at_once" | "alone";

export class TransferBatcher {
  readonly #db: Db;
  readonly #queue: Item[] = [];
  #draining = false;
  readonly #observe: (form: TransferBatchForm, transfers: number) => void;

  constructor(db: Db, observe: (form: TransferBatchForm, transfers: number) => void = () => {}) {
    this.#db = db;
    this.#observe = observe;
  }

  submit(job: TransferJob): Promise<IdempotentResult> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ job, resolve, reject });
      if (this.#draining) return;
      this.#draining = true;
      void this.#drain();
    });
  }

  async #drain(): Promise<void> {
    while (this.#queue.length > 0) await this.#write(this.#queue.splice(0, limits.transferBatchMax));
    this.#draining = false;
  }

  async #write(batch: Item[]): Promise<void> {
    try {
      await writeTransfersAtOnce(
        this.#db,
        batch.map((item) => item.job.transfer),
      );
      this.#observe("at_once", batch.length);
      for (const item of batch) item.resolve(item.job.answer);
      return;
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (typeof code !== "string" || !rolledBackCodes.has(code)) {
        for (const item of batch) item.reject(error);
        return;
      }
    }
    this.#observe("alone", batch.length);
    await Promise.all(batch.map((item) => item.job.alone().then(item.resolve, item.reject)));
  }
}
