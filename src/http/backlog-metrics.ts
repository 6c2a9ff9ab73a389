import { Gauge, type Registry } from "prom-client";
import { type Backlogs, readBacklogs } from "../db/backlogs.ts";
import type { Db } from "../db/database.ts";
import { limits } from "../limits.ts";

const gauges: Array<{ name: string; help: string; field: keyof Backlogs }> = [
  {
    name: "emisor_webhook_deliveries_pending",
    help: `Webhook deliveries not yet delivered nor failed (counted up to ${limits.backlogCountMax})`,
    field: "webhookDeliveriesPending",
  },
  {
    name: "emisor_webhook_oldest_pending_seconds",
    help: "Age of the oldest pending webhook delivery (0 when none is pending)",
    field: "webhookOldestPendingSeconds",
  },
  {
    name: "emisor_spei_outbox_jobs",
    help: `Outgoing SPEI orders in the outbox: not yet handed to the rail, or handed over and awaiting their outcome (counted up to ${limits.backlogCountMax})`,
    field: "speiOutboxJobs",
  },
  {
    name: "emisor_spei_outbox_oldest_seconds",
    help: "Age of the oldest order in the SPEI outbox (0 when it is empty)",
    field: "speiOutboxOldestSeconds",
  },
  {
    name: "emisor_airtime_topups_pending",
    help: `Airtime top-ups whose provider has not answered yet (counted up to ${limits.backlogCountMax})`,
    field: "airtimeTopupsPending",
  },
  {
    name: "emisor_airtime_oldest_pending_seconds",
    help: "Age of the oldest pending airtime top-up (0 when none is pending)",
    field: "airtimeOldestPendingSeconds",
  },
];

/**
 * The database's backlogs as gauges, read when Prometheus scrapes (never on a request's path):
 * one bounded statement over indexes (db/backlogs.ts) whose answer is kept
 * `limits.backlogMetricsCacheMs`, and shared by every gauge of a scrape. NaN when the database did
 * not answer, so an alert on the value does not fire on a gap and one on `absent`/NaN can.
 */
export function registerBacklogMetrics(registry: Registry, db: Db): void {
  let cached: { at: number; value: Promise<Backlogs | undefined> } | undefined;
  const read = () => {
    const now = Date.now();
    if (cached === undefined || now - cached.at >= limits.backlogMetricsCacheMs) {
      const value = readBacklogs(db, limits.backlogCountMax).catch(() => undefined);
      cached = { at: now, value };
      // A failed read is not kept: the next scrape asks again.
      void value.then((backlogs) => {
        if (backlogs === undefined && cached?.value === value) cached = undefined;
      });
    }
    return cached.value;
  };
  for (const { name, help, field } of gauges) {
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        this.set((await read())?.[field] ?? Number.NaN);
      },
    });
  }
}
