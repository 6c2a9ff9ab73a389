import { AppError, errors } from "../errors.ts";

interface Waiter {
  grant: () => void;
  timer: NodeJS.Timeout;
}

/**
 * Hands out a fixed number of turns (the database connections) so that no tenant queues behind
 * another tenant's burst. A freed turn goes to the waiting tenant that holds the fewest turns, the
 * one waiting longest among equals; a tenant's own requests are served in arrival order. A burst
 * therefore slows its own tenant: another tenant's request waits for one turn to end, not for the
 * burst. No tenant holds more than `share` turns at once, even with turns free: every connection
 * in use is a backend competing for the same cores, so a burst that filled the pool would slow
 * every other tenant's statements (and, past a few per core, its own). A request that cannot get a
 * turn in time fails with 6001 (503) before anything ran.
 */
export class FairGate {
  readonly #capacity: number;
  readonly #timeoutMs: number;
  readonly #share: number;
  #inUse = 0;
  readonly #held = new Map<string, number>();
  /** Tenants with requests waiting, in the order they started (or last got a turn while waiting). */
  readonly #waiting = new Map<string, Waiter[]>();

  constructor(capacity: number, timeoutMs: number, share = capacity) {
    this.#capacity = capacity;
    this.#timeoutMs = timeoutMs;
    this.#share = Math.max(1, Math.min(share, capacity));
  }

  acquire(tenant: string): Promise<void> {
    // A tenant already waiting keeps its arrival order: a newer request of its own does not pass it.
    if (this.#inUse < this.#capacity && !this.#waiting.has(tenant) && this.#heldBy(tenant) < this.#share) {
      this.#take(tenant);
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        grant: resolve,
        timer: setTimeout(() => {
          this.#forget(tenant, waiter);
          reject(new AppError(errors.databaseUnavailable, { message: "Timed out waiting for the database" }));
        }, this.#timeoutMs),
      };
      const queue = this.#waiting.get(tenant);
      if (queue) queue.push(waiter);
      else this.#waiting.set(tenant, [waiter]);
    });
  }

  release(tenant: string): void {
    const held = (this.#held.get(tenant) ?? 1) - 1;
    if (held > 0) this.#held.set(tenant, held);
    else this.#held.delete(tenant);
    this.#inUse--;
    const next = this.#nextTenant();
    if (next === undefined) return;
    const queue = this.#waiting.get(next) ?? [];
    const waiter = queue.shift();
    // Served: to the back of the line among tenants still waiting.
    this.#waiting.delete(next);
    if (queue.length > 0) this.#waiting.set(next, queue);
    if (!waiter) return;
    clearTimeout(waiter.timer);
    this.#take(next);
    waiter.grant();
  }

  #heldBy(tenant: string): number {
    return this.#held.get(tenant) ?? 0;
  }

  #take(tenant: string): void {
    this.#inUse++;
    this.#held.set(tenant, this.#heldBy(tenant) + 1);
  }

  #nextTenant(): string | undefined {
    let best: string | undefined;
    let fewest = Number.POSITIVE_INFINITY;
    for (const tenant of this.#waiting.keys()) {
      const held = this.#heldBy(tenant);
      if (held < fewest && held < this.#share) {
        best = tenant;
        fewest = held;
      }
    }
    return best;
  }

  #forget(tenant: string, waiter: Waiter): void {
    const queue = this.#waiting.get(tenant);
    if (!queue) return;
    const at = queue.indexOf(waiter);
    if (at >= 0) queue.splice(at, 1);
    if (queue.length === 0) this.#waiting.delete(tenant);
  }
}
