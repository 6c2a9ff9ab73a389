import { sql } from "kysely";
import { limits } from "../limits.ts";
import type { Queryable, Tx } from "./database.ts";
import type { Rail } from "./schema.ts";

/**
 * The rail outbox: work for a rail (an order to send, a top-up to confirm), written in the same
 * transaction as the row it names, so a committed order is always eventually handed over.
 *
 * A worker claims due jobs with FOR UPDATE SKIP LOCKED and, in the same statement, leases them by
 * moving next_attempt_at forward, so a job whose worker died becomes due again when the lease ends.
 * A claimed batch can outlive its lease (64 airtime jobs, each a provider call of up to 10 s,
 * against a 30 s lease), so the airtime worker renews each job's lease just before its call
 * (`renewRailJob`) and skips a job another worker claimed meanwhile; the SPEI dispatcher claims a
 * chunk just before sending it all at once. Either way a lease covers the calls it leases, and two
 * workers send the same job at once only if one stalls for longer than a lease between claiming
 * (or renewing) and recording the answer. The rail call happens outside any transaction
 * (PGlite has one connection; PostgreSQL should not hold a row lock across a network call).
 * Because the rails deduplicate by Emisor's id, a job sent twice (after such a stall, or after a
 * lost answer) is harmless.
 */
export interface RailJob {
  id: bigint;
  refId: string;
  /** Attempts so far, including the current one. */
  attempts: number;
}

/** Queues work for a rail; `delaySeconds` keeps it invisible to workers for that long. */
export async function enqueueRailJob(tx: Tx, rail: Rail, refId: string, delaySeconds = 0): Promise<void> {
  await sql`
    insert into rail_outbox (rail, ref_id, next_attempt_at)
    values (${rail}, ${refId}, now() + ${delaySeconds}::integer * interval '1 second')
    on conflict (rail, ref_id) do nothing`.execute(tx);
}

/** Claims up to `batch` due jobs of a rail, leasing them for `leaseSeconds`. */
export async function claimRailJobs(
  db: Queryable,
  rail: Rail,
  batch: number,
  leaseSeconds: number,
): Promise<RailJob[]> {
  const result = await sql<{ id: bigint; ref_id: string; attempts: number }>`
    update rail_outbox
    set attempts = attempts + 1, next_attempt_at = now() + ${leaseSeconds}::integer * interval '1 second'
    where id = any(array(select emisor_due_rail_jobs(${rail}, ${batch})))
    returning id, ref_id, attempts`.execute(db);
  return result.rows
    .map((row) => ({ id: BigInt(row.id), refId: row.ref_id, attempts: Number(row.attempts) }))
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/**
 * Extends a claimed job's lease by `leaseSeconds` from now, just before its rail call; false when
 * the job is gone or another worker claimed it since (its attempts moved on), and then the caller
 * must leave it alone. A job whose lease ran out but that nobody claimed is still the caller's.
 */
export async function renewRailJob(db: Queryable, job: RailJob, leaseSeconds: number): Promise<boolean> {
  const result = await sql<{ id: bigint }>`
    update rail_outbox set next_attempt_at = now() + ${leaseSeconds}::integer * interval '1 second'
    where id = ${job.id} and attempts = ${job.attempts}
    returning id`.execute(db);
  return result.rows.length > 0;
}

/** The job is done (or moot): forget it. */
export async function completeRailJob(db: Queryable, rail: Rail, refId: string): Promise<void> {
  await db.deleteFrom("rail_outbox").where("rail", "=", rail).where("ref_id", "=", refId).execute();
}

/** The attempt failed in a way worth retrying: try again after an exponential backoff. */
export async function retryRailJobLater(
  db: Queryable,
  job: RailJob,
  error: string,
  backoff: { baseSeconds: number; maxSeconds: number },
): Promise<void> {
  const wait = Math.min(backoff.maxSeconds, backoff.baseSeconds * 2 ** Math.max(0, job.attempts - 1));
  await sql`
    update rail_outbox
    set last_error = ${error.slice(0, limits.railErrorLengthMax)}, next_attempt_at = now() + ${Math.ceil(wait)}::integer * interval '1 second'
    where id = ${job.id}`.execute(db);
}

/**
 * The job is not finished but needs nothing before `seconds` from now (an order awaiting
 * settlement); `note` is kept as its last error for operators (else it is cleared).
 */
export async function postponeRailJob(
  db: Queryable,
  job: RailJob,
  seconds: number,
  note: string | null = null,
): Promise<void> {
  await sql`
    update rail_outbox set last_error = ${note?.slice(0, limits.railErrorLengthMax) ?? null}, next_attempt_at = now() + ${seconds}::integer * interval '1 second'
    where id = ${job.id}`.execute(db);
}
