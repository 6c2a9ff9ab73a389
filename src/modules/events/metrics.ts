import { Gauge, type Registry } from "prom-client";
import type { Db } from "../../db/database.ts";
import { writeTransactionsRunning } from "./repository.ts";

/**
 * What holds GET /v1/events back, at each scrape: an event is listed once every write that
 * started before it has ended (repository.ts `eventHorizon`), so a transaction left open on this
 * database (a psql session, a report) stalls every tenant's feed until it ends. These two gauges
 * show it; NaN when the database did not answer.
 */
export function registerEventMetrics(registry: Registry, db: Db): void {
  let last: Promise<{ count: number; oldestSeconds: number } | undefined> | undefined;
  // One query per scrape for both gauges.
  const read = () => {
    last ??= writeTransactionsRunning(db)
      .catch(() => undefined)
      .finally(() => {
        setImmediate(() => {
          last = undefined;
        });
      });
    return last;
  };
  new Gauge({
    name: "emisor_db_write_transactions_running",
    help: "Transactions of this database holding a transaction id; each holds back events written after it began",
    registers: [registry],
    async collect() {
      this.set((await read())?.count ?? Number.NaN);
    },
  });
  new Gauge({
    name: "emisor_db_oldest_write_transaction_seconds",
    help: "Age of the oldest of them (whose start this role may see): how long GET /v1/events may have been held back",
    registers: [registry],
    async collect() {
      this.set((await read())?.oldestSeconds ?? Number.NaN);
    },
  });
}
