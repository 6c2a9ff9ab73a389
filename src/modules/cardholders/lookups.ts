import type { Db } from "../../db/database.ts";
import { type FoundCardholderRow, findCardholdersByIds } from "./repository.ts";

interface Lookup {
  callerId: string;
  id: string;
  resolve: (row: FoundCardholderRow | undefined) => void;
  reject: (error: unknown) => void;
}

/** Lookups in one statement, at most; two statements in flight, at most. */
const batchMax = 256;
const inFlightMax = 2;

/**
 * Lookups of a cardholder by id, read together. A lookup is one short statement, and at load the
 * cost of a statement (its round trip, the syscalls on both ends, PostgreSQL's per-statement work)
 * is most of the cost of a lookup. So lookups that arrive together share one statement: the ones
 * read from the network in the same turn of the event loop, and the ones that arrive while two
 * statements are already in flight. Nothing is cached: every lookup reads the database after it
 * arrived, so it sees every write committed before it (read-your-writes, across processes too);
 * each keeps its own caller's tenancy check.
 */
export class CardholderLookups {
  readonly #db: Db;
  readonly #queue: Lookup[] = [];
  #inFlight = 0;
  #scheduled = false;

  constructor(db: Db) {
    this.#db = db;
  }

  byId(callerId: string, id: string): Promise<FoundCardholderRow | undefined> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ callerId, id, resolve, reject });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= inFlightMax || this.#queue.length === 0) return;
    this.#scheduled = true;
    // After this turn's network reads, so the lookups read with this one share its statement.
    setImmediate(() => {
      this.#scheduled = false;
      void this.#flush();
    });
  }

  async #flush(): Promise<void> {
    if (this.#inFlight >= inFlightMax || this.#queue.length === 0) return;
    const batch = this.#queue.splice(0, batchMax);
    this.#inFlight++;
    try {
      const rows = await findCardholdersByIds(this.#db, batch);
      batch.forEach((lookup, i) => {
        lookup.resolve(rows[i]);
      });
    } catch (error) {
      for (const lookup of batch) lookup.reject(error);
    } finally {
      this.#inFlight--;
      this.#schedule();
    }
  }
}
