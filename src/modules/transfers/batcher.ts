import { BatchQueue, type Queued } from "../../db/batch-queue.ts";
import type { Db } from "../../db/database.ts";
import { batchWroteNothing } from "../../db/failures.ts";
import type { IdempotentResult } from "../../idempotency/reply.ts";
import { limits } from "../../limits.ts";
import { type BatchedTransfer, writeTransfersAtOnce } from "./batch-repository.ts";
import type { SpeiHandOver } from "./dispatcher.ts";

/**
 * Transfers out, batched. Each transfer on its own would be a transaction of several statements,
 * and on this path the round trips, not the work, are the cost. So transfers decided at the same
 * moment (card, PIN, commission, balance as just read) queue here, per process, and each batch
 * writes everything that queued while the previous one was being written, as ONE statement
 * (`writeTransfersAtOnce`) that checks under lock what every transfer was decided on. When a check
 * fails the statement writes nothing, and each transfer of the batch runs on its own (`alone`),
 * which answers its own refusal or success; the next batch waits for them, so transfers of one
 * card keep their order. With a hand-over (this process runs the SPEI workers), a batch's orders go
 * to the rail as soon as it commits.
 */
export interface TransferJob {
  transfer: BatchedTransfer;
  /** The answer once the batch is written. */
  answer: IdempotentResult;
  /** The transfer in a transaction of its own. */
  alone: () => Promise<IdempotentResult>;
}

export type TransferBatchForm = "at_once" | "alone";

export class TransferBatcher {
  readonly #db: Db;
  readonly #observe: (form: TransferBatchForm, transfers: number) => void;
  readonly #queue: BatchQueue<TransferJob, IdempotentResult>;
  #handOver: SpeiHandOver | undefined;

  constructor(db: Db, observe: (form: TransferBatchForm, transfers: number) => void = () => {}) {
    this.#db = db;
    this.#observe = observe;
    this.#queue = new BatchQueue(limits.transferBatchMax, (batch) => this.#write(batch));
  }

  submit(job: TransferJob): Promise<IdempotentResult> {
    return this.#queue.submit(job);
  }

  /** Batches written from now on hand their orders to `handOver` (undefined: to the dispatcher's passes). */
  handOverWith(handOver: SpeiHandOver | undefined): void {
    this.#handOver = handOver;
  }

  async #write(batch: Queued<TransferJob, IdempotentResult>[]): Promise<void> {
    const transfers = batch.map(({ item }) => item.transfer);
    const handOver = this.#handOver?.reserve(batch.length) ? this.#handOver : undefined;
    try {
      const jobs = await writeTransfersAtOnce(this.#db, transfers, handOver && limits.railLeaseSeconds);
      this.#observe("at_once", batch.length);
      for (const { item, resolve } of batch) resolve(item.answer);
      handOver?.start(jobs, new Map(transfers.map(({ row }) => [row.id, row])), batch.length);
      return;
    } catch (error) {
      handOver?.release(batch.length);
      if (!batchWroteNothing(error)) throw error;
    }
    this.#observe("alone", batch.length);
    await Promise.all(batch.map(({ item, resolve, reject }) => item.alone().then(resolve, reject)));
  }
}
