/** One piece of work in a batch, with the callbacks that answer its caller. */
export interface Queued<I, O> {
  item: I;
  resolve: (result: O) => void;
  reject: (error: unknown) => void;
}

/**
 * Work that is cheaper written together: whatever queues while one batch is being written becomes
 * the next batch (at most `max` items), so a batch is as large as the load makes it and a lone item
 * waits for nothing. One batch is in flight per queue; `write` answers every item it is given.
 */
export class BatchQueue<I, O> {
  readonly #queue: Queued<I, O>[] = [];
  readonly #max: number;
  readonly #write: (batch: Queued<I, O>[]) => Promise<void>;
  #draining = false;

  constructor(max: number, write: (batch: Queued<I, O>[]) => Promise<void>) {
    this.#max = max;
    this.#write = write;
  }

  submit(item: I): Promise<O> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      if (this.#draining) return;
      this.#draining = true;
      void this.#drain();
    });
  }

  /** What queued since the batch in flight was taken (up to `max`), for its write to take too. */
  take(): Queued<I, O>[] {
    return this.#queue.splice(0, this.#max);
  }

  async #drain(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0, this.#max);
      try {
        await this.#write(batch);
      } catch (error) {
        for (const queued of batch) queued.reject(error);
      }
    }
    this.#draining = false;
  }
}
