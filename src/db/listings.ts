import { sql } from "kysely";
import type { Database, Db } from "./database.ts";

/**
 * Where the heavy listings read (collection operations, card movements, authorizations, events):
 * a streaming replica (DATABASE_READ_URL) once it has replayed every write committed on the
 * primary before the listing began, else the primary.
 *
 * Each listing reads the primary's WAL insert position (one trivial statement) and waits until
 * the replica's replay position has passed it, up to `waitMs`; past that it reads the primary.
 * Every commit whose answer was sent before the listing arrived wrote its commit record below
 * that position, so a listing never misses a write that finished before it, whichever process
 * made it (a caller reads its own payment at once, and no listing is older than the one before
 * it). The replay position is polled by one loop shared by every waiting listing, only while
 * some listing waits.
 */
export interface ListingReads {
  /** The handle a listing reads from, after the replica caught up (or the primary). */
  reader(): Promise<Db>;
  readonly counts: { replica: number; primary: number };
}

/** Without a replica: every listing reads the primary. */
export function primaryListings(primary: Database): ListingReads {
  const counts = { replica: 0, primary: 0 };
  return {
    counts,
    reader: async () => {
      counts.primary += 1;
      return primary.db;
    },
  };
}

/** "16/B374D848" as a number, to compare WAL positions. */
export function lsnValue(lsn: string): bigint {
  const [high = "0", low = "0"] = lsn.split("/");
  return (BigInt(`0x${high}`) << 32n) + BigInt(`0x${low}`);
}

interface Waiter {
  target: bigint;
  resolve(caughtUp: boolean): void;
}

export class ReplicaListings implements ListingReads {
  readonly counts = { replica: 0, primary: 0 };
  readonly #primary: Database;
  readonly #replica: Database;
  readonly #waitMs: number;
  readonly #pollMs: number;
  #replayed = -1n;
  readonly #waiters = new Set<Waiter>();
  #polling = false;

  constructor(primary: Database, replica: Database, options: { waitMs: number; pollMs: number }) {
    this.#primary = primary;
    this.#replica = replica;
    this.#waitMs = options.waitMs;
    this.#pollMs = options.pollMs;
  }

  async reader(): Promise<Db> {
    const { rows } = await sql<{ lsn: string }>`select pg_current_wal_insert_lsn()::text as lsn`.execute(
      this.#primary.db,
    );
    const target = lsnValue(rows[0]?.lsn ?? "0/0");
    const caughtUp =
      this.#replayed >= target ||
      (await new Promise<boolean>((resolve) => {
        // Its own timer: a replica that does not answer at all must not hold the listing longer.
        const waiter: Waiter = {
          target,
          resolve: (caughtUp) => {
            clearTimeout(timer);
            this.#waiters.delete(waiter);
            resolve(caughtUp);
          },
        };
        const timer = setTimeout(() => waiter.resolve(false), this.#waitMs);
        this.#waiters.add(waiter);
        void this.#poll();
      }));
    if (caughtUp) this.counts.replica += 1;
    else this.counts.primary += 1;
    return caughtUp ? this.#replica.db : this.#primary.db;
  }

  /** Reads the replica's replay position until no listing waits; answers each waiter. */
  async #poll(): Promise<void> {
    if (this.#polling) return;
    this.#polling = true;
    try {
      while (this.#waiters.size > 0) {
        const replayed = await this.#replayPosition();
        if (replayed !== undefined && replayed > this.#replayed) this.#replayed = replayed;
        for (const waiter of this.#waiters) {
          if (this.#replayed >= waiter.target) waiter.resolve(true);
          else if (replayed === undefined) waiter.resolve(false);
        }
        if (this.#waiters.size > 0) await new Promise((resolve) => setTimeout(resolve, this.#pollMs));
      }
    } finally {
      this.#polling = false;
    }
  }

  /**
   * undefined when the replica cannot answer (down), or is no standby (promoted in a failover, or
   * misconfigured): its replay position no longer follows the primary, so the listings read the
   * primary at once instead of waiting out the bound each time.
   */
  async #replayPosition(): Promise<bigint | undefined> {
    try {
      const { rows } = await sql<{ lsn: string | null; standby: boolean }>`
        select pg_last_wal_replay_lsn()::text as lsn, pg_is_in_recovery() as standby`.execute(
        this.#replica.db,
      );
      const row = rows[0];
      return row?.standby && row.lsn ? lsnValue(row.lsn) : undefined;
    } catch {
      return undefined;
    }
  }
}
