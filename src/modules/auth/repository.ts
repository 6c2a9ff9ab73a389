import assert from "node:assert/strict";
import { sql } from "kysely";
import type { Queryable } from "../../db/database.ts";
import { effectiveClientStatus } from "../clients/repository.ts";

/** SQL of the auth module: API keys with their client, failed-login counters, revoked tokens. */
export interface KeyForLogin {
  apiKeyId: string;
  clientId: string;
  passwordHash: string;
  keyStatus: "ACTIVE" | "DISABLED";
  clientStatus: "ACTIVE" | "DISABLED";
}

/** Who is logging in: the key id as sent (whether a key has it or not) and the caller's address. */
export interface LoginAttempt {
  apiKey: string;
  address: string;
}

/** The limits of limits.ts, passed in: how many failures, counted how long. */
export interface LoginRules {
  addressFailuresMax: number;
  addressWindowSeconds: number;
  keyFailuresMax: number;
  keyLockSeconds: number;
}

/** Seconds until the address (2007) and the key id (2008) may log in again; `null`: not limited. */
export interface LoginLimits {
  addressRetryAfter: number | null;
  keyRetryAfter: number | null;
}

/**
 * Seconds left while a row of login_failures refuses logins (its failures reached `max` and it has
 * not expired), in the database's clock, which every process shares; `null` otherwise.
 */
function retryAfter(kind: "address" | "key", subject: string, max: number) {
  return sql<number | null>`(select ceil(extract(epoch from f.expires_at - now()))::int
    from login_failures f
    where f.kind = ${kind} and f.subject = ${subject} and f.failures >= ${max} and f.expires_at > now())`;
}

function limitsOf(row: { address_retry_after: number | null; key_retry_after: number | null }): LoginLimits {
  return { addressRetryAfter: row.address_retry_after, keyRetryAfter: row.key_retry_after };
}

/**
 * The key a login names (`undefined`: none has that id) and the limits of its address and key
 * id, in one round trip. The same statement runs whether the key exists or not.
 */
export async function findKeyForLogin(
  db: Queryable,
  attempt: LoginAttempt,
  rules: LoginRules,
): Promise<{ key: KeyForLogin | undefined; limits: LoginLimits }> {
  const { rows } = await sql<{
    id: string | null;
    client_id: string;
    password_hash: string;
    status: "ACTIVE" | "DISABLED";
    client_status: "ACTIVE" | "DISABLED";
    address_retry_after: number | null;
    key_retry_after: number | null;
  }>`
    select k.id, k.client_id, k.password_hash, k.status, ${effectiveClientStatus} as client_status,
      ${retryAfter("address", attempt.address, rules.addressFailuresMax)} as address_retry_after,
      ${retryAfter("key", attempt.apiKey, rules.keyFailuresMax)} as key_retry_after
    from (values (1)) as one (x)
    left join api_keys k on k.key = ${attempt.apiKey}
    left join clients c on c.id = k.client_id`.execute(db);
  const row = rows[0];
  assert.ok(row, "a select from one row answers one row");
  const key = row.id
    ? {
        apiKeyId: row.id,
        clientId: row.client_id,
        passwordHash: row.password_hash,
        keyStatus: row.status,
        clientStatus: row.client_status,
      }
    : undefined;
  return { key, limits: limitsOf(row) };
}

/** The limits of a login's address and key id as they stand now. */
export async function loginLimits(
  db: Queryable,
  attempt: LoginAttempt,
  rules: LoginRules,
): Promise<LoginLimits> {
  const { rows } = await sql<{ address_retry_after: number | null; key_retry_after: number | null }>`
    select ${retryAfter("address", attempt.address, rules.addressFailuresMax)} as address_retry_after,
      ${retryAfter("key", attempt.apiKey, rules.keyFailuresMax)} as key_retry_after`.execute(db);
  const row = rows[0];
  assert.ok(row, "a select without from answers one row");
  return limitsOf(row);
}

/**
 * Counts a failed login against its address and then its key id, in one statement whose upserts
 * lock each row while they count (several processes counting at once lose none). An address's
 * count that expired starts again at 1 with a new window; a key id's count lives the lock's length
 * after its last failure, so the failure that reaches the limit locks it that long. A failure
 * that finds its address or key already at the limit (its check raced the failures that got it
 * there) is not counted, and neither is the key's when the address was: it answers the limit
 * then, with both `null` otherwise.
 */
export async function recordFailedLogin(
  db: Queryable,
  attempt: LoginAttempt,
  rules: LoginRules,
): Promise<LoginLimits> {
  const { rows } = await sql<{ address_counted: boolean; key_counted: boolean }>`
    with by_address as (
      insert into login_failures as f (kind, subject, failures, expires_at)
      values ('address', ${attempt.address}, 1, now() + make_interval(secs => ${rules.addressWindowSeconds}))
      on conflict (kind, subject) do update set
        failures = case when f.expires_at <= now() then 1 else f.failures + 1 end,
        expires_at = case when f.expires_at <= now() then excluded.expires_at else f.expires_at end
      where f.expires_at <= now() or f.failures < ${rules.addressFailuresMax}
      returning 1
    ), by_key as (
      insert into login_failures as f (kind, subject, failures, expires_at)
      select 'key', ${attempt.apiKey}, 1, now() + make_interval(secs => ${rules.keyLockSeconds})
      from by_address
      on conflict (kind, subject) do update set
        failures = case when f.expires_at <= now() then 1 else f.failures + 1 end,
        expires_at = excluded.expires_at
      where f.expires_at <= now() or f.failures < ${rules.keyFailuresMax}
      returning 1
    )
    select exists (select 1 from by_address) as address_counted,
      exists (select 1 from by_key) as key_counted`.execute(db);
  const row = rows[0];
  assert.ok(row, "a select without from answers one row");
  if (row.key_counted) return { addressRetryAfter: null, keyRetryAfter: null };
  // Not counted: the row reached its limit before this failure (a check that raced the failures
  // that got it there), rarely enough to read its end in a second statement. A limit that ended
  // in between still answers, for a second.
  const now = await loginLimits(db, attempt, rules);
  return row.address_counted
    ? { addressRetryAfter: null, keyRetryAfter: now.keyRetryAfter ?? 1 }
    : { addressRetryAfter: now.addressRetryAfter ?? 1, keyRetryAfter: null };
}

/**
 * A right password: clears the key id's count, unless its address or key reached the limit while
 * the password was checked (attempts racing this one); answers those limits, both `null` when the
 * count was cleared.
 */
export async function recordLoginSuccess(
  db: Queryable,
  attempt: LoginAttempt,
  rules: LoginRules,
): Promise<LoginLimits> {
  const { rows } = await sql<{
    address_retry_after: number | null;
    key_retry_after: number | null;
    counted: boolean;
    cleared: boolean;
  }>`
    with cleared as (
      delete from login_failures f
      where f.kind = 'key' and f.subject = ${attempt.apiKey}
        and (f.expires_at <= now() or f.failures < ${rules.keyFailuresMax})
        and not exists (
          select 1 from login_failures a
          where a.kind = 'address' and a.subject = ${attempt.address}
            and a.failures >= ${rules.addressFailuresMax} and a.expires_at > now())
      returning 1
    )
    select ${retryAfter("address", attempt.address, rules.addressFailuresMax)} as address_retry_after,
      ${retryAfter("key", attempt.apiKey, rules.keyFailuresMax)} as key_retry_after,
      exists (select 1 from login_failures f where f.kind = 'key' and f.subject = ${attempt.apiKey}) as counted,
      exists (select 1 from cleared) as cleared`.execute(db);
  const row = rows[0];
  assert.ok(row, "a select without from answers one row");
  // The limits are read as the statement began. A count there that the delete did not clear, with
  // no limit, changed in between: the failures that locked the key committed meanwhile.
  if (row.counted && !row.cleared && row.address_retry_after === null && row.key_retry_after === null)
    return loginLimits(db, attempt, rules);
  return limitsOf(row);
}

/** Forgets a key id's failed logins (its lock with them); true when there were any. */
export async function forgetKeyFailures(db: Queryable, apiKey: string): Promise<boolean> {
  const deleted = await db
    .deleteFrom("login_failures")
    .where("kind", "=", "key")
    .where("subject", "=", apiKey)
    .returning("subject")
    .execute();
  return deleted.length > 0;
}

/**
 * Deletes up to `max` rows of login_failures that expired (they no longer count), skipping rows
 * another statement holds: it never waits, so it cannot deadlock with the counts.
 */
export async function purgeLoginFailures(db: Queryable, max: number): Promise<void> {
  await sql`
    delete from login_failures where (kind, subject) in (
      select kind, subject from login_failures where expires_at <= now()
      order by expires_at limit ${max} for update skip locked)`.execute(db);
}

export interface KeyState {
  apiKeyId: string;
  clientId: string;
  rootId: string;
  lineage: string[];
  active: boolean;
  revokedTokenIds: Set<string>;
}

/** What authenticating a token needs to know about its key, loaded in one round trip. */
export async function loadKeyState(db: Queryable, apiKeyId: string): Promise<KeyState | undefined> {
  const row = await db
    .selectFrom("api_keys as k")
    .innerJoin("clients as c", "c.id", "k.client_id")
    .select((eb) => [
      "k.id",
      "k.client_id",
      "c.root_id",
      "c.lineage",
      "k.status",
      effectiveClientStatus.as("client_status"),
      eb
        .selectFrom("revoked_tokens as r")
        .select(sql<string[]>`coalesce(array_agg(r.jti), '{}')`.as("jtis"))
        .whereRef("r.api_key_id", "=", "k.id")
        .where("r.expires_at", ">", sql<Date>`now()`)
        .as("revoked"),
    ])
    .where("k.id", "=", apiKeyId)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    apiKeyId: row.id,
    clientId: row.client_id,
    rootId: row.root_id,
    lineage: row.lineage,
    active: row.status === "ACTIVE" && row.client_status === "ACTIVE",
    revokedTokenIds: new Set(row.revoked ?? []),
  };
}

export async function revokeToken(db: Queryable, jti: string, apiKeyId: string, expiresAt: Date) {
  await db
    .insertInto("revoked_tokens")
    .values({ jti, api_key_id: apiKeyId, expires_at: expiresAt })
    .onConflict((oc) => oc.column("jti").doNothing())
    .execute();
  await db.deleteFrom("revoked_tokens").where("expires_at", "<", new Date()).execute();
}
