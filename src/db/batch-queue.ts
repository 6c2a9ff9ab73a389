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
 * With `gatherMs`, each batch first waits that long for more (work nobody waits on, such as
 * recording what a rail accepted), so that one write takes what several would.
 */
export class BatchQueue<I, O> {
  readonly #queue: Queued<I, O>[] = [];
  readonly #max: number;
  readonly #write: (batch: Queued<I, O>[]) => Promise<void>;
  readonly #gatherMs: number;
  #draining = false;

  constructor(max: number, write: (batch: Queued<I, O>[]) => Promise<void>, gatherMs = 0) {
    this.#max = max;
    this.#write = write;
    this.#gatherMs = gatherMs;
  }

  submit(item: I): Promise<O> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      if (this.#draining) return;
      this.#draining = true;
      void this.#drain();
    });
  }

  async #drain(): Promise<void> {
    while (this.#queue.length > 0) {
      if (this.#gatherMs > 0) await new Promise((resolve) => setTimeout(resolve, this.#gatherMs));
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
