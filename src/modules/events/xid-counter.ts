import type { Db } from "../../db/database.ts";
import { limits } from "../../limits.ts";
import { consumeTransactionIds, eventXidsAhead } from "./repository.ts";

/**
 * GET /v1/events orders events by the id of the transaction that wrote them and lists those below
 * this cluster's running transactions (repository.ts `eventHorizon`). Those ids are the cluster's:
 * events copied from another cluster (a dump restored here, a logical-replication move) can carry
 * ids this cluster has not given yet, and would stay hidden, then be passed by new events, until
 * its counter caught up. So a start first moves this cluster's counter past the highest id among
 * the events, by having it give (and commit) that many empty transactions, about 300,000 a
 * second; every id and cursor keeps its meaning. Beyond `limits.eventXidCatchUpMax` ids the start
 * stops instead, and says what to run.
 */
export async function alignTransactionCounter(db: Db, warn: (message: string) => void): Promise<void> {
  let ahead = await eventXidsAhead(db);
  if (!ahead) return;
  const gap = ahead.highest - ahead.next + 1n;
  if (gap > BigInt(limits.eventXidCatchUpMax)) {
    throw new Error(
      `the events were written by another PostgreSQL cluster whose transaction ids ran ${gap} ahead of this one's (event transaction ${ahead.highest}, next here ${ahead.next}): more than the ${limits.eventXidCatchUpMax} a start advances by itself. Run, as often as needed until it reports none left, outside a transaction: do $$ begin for i in 1..10000000 loop perform pg_current_xact_id(); commit; end loop; end $$; then start again (docs/operations.md, "Upgrades")`,
    );
  }
  warn(
    `the events were written by another PostgreSQL cluster (a restored dump?): advancing this cluster's transaction counter by ${gap} so that their order and every event cursor keep their meaning`,
  );
  while (ahead) {
    let left = ahead.highest - ahead.next + 1n;
    while (left > 0n) {
      const step = left > 1_000_000n ? 1_000_000 : Number(left);
      await consumeTransactionIds(db, step);
      left -= BigInt(step);
    }
    ahead = await eventXidsAhead(db);
  }
}
