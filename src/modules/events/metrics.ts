import { Gauge, type Registry } from "prom-client";
import type { Db } from "../../db/database.ts";
import { writeTransactionsRunning } from "./repository.ts";

/**
 * What holds GET /v1/events back, at each scrape: an event is listed once every write that
 * started before it has ended (repository.ts `eventHorizon`), so a transaction left open on this
 * database (a psql session, a report) stalls every tenant's feed until it ends. The registry
 * collects every metric of a scrape at once, so both gauges share the query in flight. NaN when
 * the database did not answer.
 */
export function registerEventMetrics(registry: Registry, db: Db): void {
  let pending: ReturnType<typeof read> | undefined;
  const read = () => writeTransactionsRunning(db).catch(() => undefined);
  const shared = () => {
    pending ??= read().finally(() => {
      pending = undefined;
    });
    return pending;
  };
  new Gauge({
    name: "emisor_db_write_transactions_running",
    help: "Transactions of this database holding a transaction id; each holds back events written after it began",
    registers: [registry],
    async collect() {
      this.set((await shared())?.count ?? Number.NaN);
    },
  });
  new Gauge({
    name: "emisor_db_oldest_write_transaction_seconds",
    help: "Age of the oldest of them (whose start this role may see): how long GET /v1/events may have been held back",
    registers: [registry],
    async collect() {
      this.set((await shared())?.oldestSeconds ?? Number.NaN);
    },
  });
}
