import { sql } from "kysely";
import type { Queryable } from "./database.ts";

/** A token bucket: `perSecond` tokens a second, up to `burst`. */
export interface BucketRule {
  perSecond: number;
  burst: number;
}

export interface Lease {
  /** Tokens taken from the bucket, 0 to `want`; the bucket keeps what is left. */
  granted: number;
  /** What the bucket holds after the lease (below 1 when it granted nothing). */
  left: number;
}

/**
 * Takes up to `want` whole tokens from `subject`'s shared bucket in one statement (one round trip,
 * no transaction around it): the row is refilled for the time since its last lease, and what it
 * grants never exceeds what it holds, so however many processes lease at once the bucket never
 * gives more than its rule allows. A missing row is a full bucket. The row lock is held for this
 * one statement only.
 */
export async function leaseTokens(
  db: Queryable,
  subject: string,
  rule: BucketRule,
  want: number,
): Promise<Lease> {
  const available = sql`least(${rule.burst}::float8,
    b.tokens + greatest(0, extract(epoch from now() - b.refilled_at))::float8 * ${rule.perSecond}::float8)`;
  const granted = sql`least(${want}::float8, floor(${available}))`;
  const result = await sql<{ granted: number; tokens: number }>`
    insert into rate_limit_buckets as b (subject, tokens, granted, refilled_at)
    values (${subject}, greatest(0, ${rule.burst}::float8 - least(${want}, floor(${rule.burst}::float8))),
      least(${want}, floor(${rule.burst}::float8))::integer, now())
    on conflict (subject) do update set
      tokens = greatest(0, ${available} - ${granted}),
      granted = ${granted}::integer,
      refilled_at = now()
    returning granted, tokens`.execute(db);
  const row = result.rows[0];
  return { granted: Number(row?.granted ?? 0), left: Number(row?.tokens ?? 0) };
}
