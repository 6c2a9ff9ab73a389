import { AppError, errors } from "../errors.ts";

/** A FIFO lock with a bounded wait: a caller that cannot get it in time gets a 503, not a hang. */
export class Mutex {
  #locked = false;
  readonly #waiters: Array<{ grant: () => void; timer: NodeJS.Timeout }> = [];
  readonly #timeoutMs: number;

  constructor(timeoutMs: number) {
    this.#timeoutMs = timeoutMs;
  }

  lock(): Promise<void> {
    if (!this.#locked) {
      this.#locked = true;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const waiter = {
        grant: resolve,
        timer: setTimeout(() => {
          this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
          reject(new AppError(errors.databaseUnavailable, { message: "Timed out waiting for the database" }));
        }, this.#timeoutMs),
      };
      this.#waiters.push(waiter);
    });
  }

  unlock(): void {
    const next = this.#waiters.shift();
    if (next) {
      clearTimeout(next.timer);
      next.grant();
    } else {
      this.#locked = false;
    }
  }
}
