import { sql } from "kysely";
import type { Db } from "./database.ts";

/**
 * Work waiting in the database, as /metrics shows it: how many rows wait (counted up to `countMax`,
 * so a huge backlog costs no more to read than `countMax` index entries) and how long the oldest
 * has waited, in seconds (0 when none waits). One statement; each part reads an index of
 * migration 0029.
 */
export interface Backlogs {
  webhookDeliveriesPending: number;
  webhookOldestPendingSeconds: number;
  speiOutboxJobs: number;
  speiOutboxOldestSeconds: number;
  airtimeTopupsPending: number;
  airtimeOldestPendingSeconds: number;
}

export async function readBacklogs(db: Db, countMax: number): Promise<Backlogs> {
  const result = await sql<Record<string, string | number | null>>`
    select
      (select count(*) from (select 1 from webhook_deliveries where status = 'PENDING' limit ${countMax}) w)
        as webhook_pending,
      (select extract(epoch from now() - min(created_at)) from webhook_deliveries where status = 'PENDING')
        as webhook_oldest,
      (select count(*) from (select 1 from rail_outbox where rail = 'SPEI' limit ${countMax}) s) as spei_jobs,
      (select extract(epoch from now() - min(created_at)) from rail_outbox where rail = 'SPEI') as spei_oldest,
      (select count(*) from (select 1 from airtime_topups where status = 'PENDING' limit ${countMax}) a)
        as airtime_pending,
      (select extract(epoch from now() - min(created_at)) from airtime_topups where status = 'PENDING')
        as airtime_oldest`.execute(db);
  const row = result.rows[0] ?? {};
  const number = (value: string | number | null | undefined) => Math.max(0, Number(value ?? 0));
  return {
    webhookDeliveriesPending: number(row.webhook_pending),
    webhookOldestPendingSeconds: number(row.webhook_oldest),
    speiOutboxJobs: number(row.spei_jobs),
    speiOutboxOldestSeconds: number(row.spei_oldest),
    airtimeTopupsPending: number(row.airtime_pending),
    airtimeOldestPendingSeconds: number(row.airtime_oldest),
  };
}
