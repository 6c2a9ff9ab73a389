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
  lockedUntil: Date | null;
}

export async function findKeyForLogin(db: Queryable, apiKey: string): Promise<KeyForLogin | undefined> {
  const row = await db
    .selectFrom("api_keys as k")
    .innerJoin("clients as c", "c.id", "k.client_id")
    .select([
      "k.id",
      "k.client_id",
      "k.password_hash",
      "k.status",
      effectiveClientStatus.as("client_status"),
      "k.locked_until",
    ])
    .where("k.key", "=", apiKey)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    apiKeyId: row.id,
    clientId: row.client_id,
    passwordHash: row.password_hash,
    keyStatus: row.status,
    clientStatus: row.client_status,
    lockedUntil: row.locked_until,
  };
}

/**
 * Counts a failed login; the failure that reaches `max` locks the key for `lockSeconds`. A
 * failure of a key already locked (its check raced the failures that locked it) is not counted:
 * answers the lock's end then, `null` otherwise.
 */
export async function recordFailedLogin(
  db: Queryable,
  apiKeyId: string,
  max: number,
  lockSeconds: number,
): Promise<Date | null> {
  const { rows } = await sql`
    update api_keys set
      failed_logins = case when failed_logins + 1 >= ${max} then 0 else failed_logins + 1 end,
      locked_until = case when failed_logins + 1 >= ${max}
        then now() + make_interval(secs => ${lockSeconds}) end
    where id = ${apiKeyId} and (locked_until is null or locked_until <= now())
    returning id`.execute(db);
  return rows.length > 0 ? null : await lockedUntil(db, apiKeyId);
}

/**
 * A right password: clears the count, unless the key locked while the password was checked
 * (attempts racing this one reached the limit); answers the lock's end then, `null` otherwise.
 */
export async function recordLoginSuccess(db: Queryable, apiKeyId: string): Promise<Date | null> {
  const { rows } = await sql`
    update api_keys set failed_logins = 0, locked_until = null
    where id = ${apiKeyId} and (locked_until is null or locked_until <= now())
    returning id`.execute(db);
  return rows.length > 0 ? null : await lockedUntil(db, apiKeyId);
}

/** When the key's lock ends (past or `null`: not locked). */
export async function lockedUntil(db: Queryable, apiKeyId: string): Promise<Date | null> {
  const row = await db
    .selectFrom("api_keys")
    .select("locked_until")
    .where("id", "=", apiKeyId)
    .executeTakeFirst();
  return row?.locked_until ?? null;
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
