import { sql } from "kysely";
import type { Queryable, Tx } from "../db/database.ts";
import { jsonbArray } from "../db/jsonb-array.ts";
import { AppError, errors } from "../errors.ts";
import { limits } from "../limits.ts";
import type { IdempotentResult, StoredResponse } from "./reply.ts";

/**
 * The idempotency keys table: a key's stored reply, found again by its scope (API key, key, and
 * the request's fingerprint). A key is kept `limits.idempotencyKeyTtlHours` (48 h). Past that it is
 * gone whether or not the purge (workers.ts) has deleted its row yet: the lookups see only keys
 * younger than the retention, and storing a key takes over the row of an expired one, so what a
 * client gets never depends on when the purge last ran.
 */
export interface IdempotencyScope {
  apiKeyId: string;
  key: string;
  requestHash: string;
  /**
   * The fingerprint in its earlier forms, over the URL's path instead of the route and its decoded
   * parameters: the whole body, and on routes with ciphered fields the rest of the body completed
   * with what they named. A key stored in such a form (up to 48 hours old) still replays instead of
   * answering 4001. Never stored; computed only when the current form does not match.
   */
  legacyRequestHashes?: (() => string[]) | undefined;
}

/** Whether a stored fingerprint is this request's, in its current or an earlier form. */
export function sameRequest(storedHash: string, scope: IdempotencyScope): boolean {
  return storedHash === scope.requestHash || (scope.legacyRequestHashes?.().includes(storedHash) ?? false);
}

/**
 * The start of an IdempotencyScope on a route whose body carries ciphered values (a card number, a
 * PIN under RSA-OAEP). A ciphertext differs at every encryption, so it cannot be fingerprinted: a
 * client that ciphers again when it retries would get 4001 instead of its answer. The hook
 * fingerprints the rest of the body; the service, once it has deciphered the values, completes
 * the fingerprint with what they name (the card, never the number). A credential (the PIN) is
 * left out: it is checked again on every attempt, and it is not what the operation does.
 */
export interface IdempotencyDraft {
  complete(named: Record<string, string | undefined>): IdempotencyScope;
}

/**
 * The oldest `created_at` of a key still kept, in the database's clock (the transaction's start):
 * a key created at or before it has expired.
 */
export const retentionStart = sql<Date>`now() - make_interval(hours => ${sql.lit(limits.idempotencyKeyTtlHours)})`;

/**
 * Inserts the response; false when the key is already taken (by a committed transaction). An
 * expired key's row that the purge has not deleted yet is taken over, as if it were gone.
 */
export async function recordResponse(
  tx: Queryable,
  scope: IdempotencyScope,
  response: StoredResponse,
): Promise<boolean> {
  const inserted = await tx
    .insertInto("idempotency_keys")
    .values({
      api_key_id: scope.apiKeyId,
      key: scope.key,
      request_hash: scope.requestHash,
      response_status: response.status,
      response_body: JSON.stringify(response.body),
    })
    .onConflict((oc) =>
      oc
        .columns(["api_key_id", "key"])
        .doUpdateSet((eb) => ({
          request_hash: eb.ref("excluded.request_hash"),
          response_status: eb.ref("excluded.response_status"),
          response_body: eb.ref("excluded.response_body"),
          created_at: sql<Date>`now()`,
        }))
        .where("idempotency_keys.created_at", "<=", retentionStart),
    )
    .returning("key")
    .executeTakeFirst();
  return inserted !== undefined;
}

/**
 * The stored response for this key: a replay when the request matches, 409 when it does not.
 * An expired key is not found (the primary key finds the row; its age is one more comparison).
 */
export async function findStoredResponse(
  db: Queryable,
  scope: IdempotencyScope,
): Promise<IdempotentResult | undefined> {
  const row = await db
    .selectFrom("idempotency_keys")
    .select(["request_hash", "response_status", "response_body"])
    .where("api_key_id", "=", scope.apiKeyId)
    .where("key", "=", scope.key)
    .where("created_at", ">", retentionStart)
    .executeTakeFirst();
  if (!row) return undefined;
  if (!sameRequest(row.request_hash, scope)) throw new AppError(errors.idempotencyKeyReused);
  return { status: row.response_status, body: row.response_body as StoredResponse["body"], replayed: true };
}

/**
 * Completes a draft (see IdempotencyDraft) and looks the key up, as the hook does for the other
 * routes: `stored` is the first answer to replay (a different request under the key is 4001).
 */
export async function completeDraft(
  db: Queryable,
  draft: IdempotencyDraft | undefined,
  named: Record<string, string | undefined>,
): Promise<{ scope: IdempotencyScope | undefined; stored: IdempotentResult | undefined }> {
  const scope = draft?.complete(named);
  return { scope, stored: scope && (await findStoredResponse(db, scope)) };
}

/**
 * Deletes up to `max` expired keys, oldest first (the created_at index), skipping rows another
 * transaction holds: it never waits, so passes of several processes at once neither block one
 * another nor a request taking over an expired key. Answers how many it deleted.
 */
export async function purgeIdempotencyKeys(db: Queryable, max: number): Promise<number> {
  const result = await sql`
    delete from idempotency_keys where (api_key_id, key) in (
      select api_key_id, key from idempotency_keys where created_at <= ${retentionStart}
      order by created_at limit ${max} for update skip locked)`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}

/**
 * A stored key as later work finds it again. `answers` is the value its stored answer holds at
 * `path` (a top-up's id at data.topup.id) when the answer is this work's: once the key expires
 * (48 hours) it may be reused for another request, whose answer must not be replaced or forgotten.
 */
export interface StoredKeyRef {
  apiKeyId: string;
  key: string;
  answers?: { path: string[]; value: string };
}

/**
 * Replaces the stored response of a key: for work finished after the request's transaction (an
 * airtime top-up confirmed by the provider later), so a replay tells the final outcome.
 */
export async function replaceStoredResponse(
  tx: Tx,
  key: StoredKeyRef,
  response: StoredResponse,
): Promise<void> {
  await tx
    .updateTable("idempotency_keys")
    .set({ response_status: response.status, response_body: JSON.stringify(response.body) })
    .where("api_key_id", "=", key.apiKeyId)
    .where("key", "=", key.key)
    .where(answersFilter(key))
    .execute();
}

/** Forgets a key whose work failed after it was stored: like any failure, a retry is evaluated again. */
export async function forgetIdempotencyKey(tx: Tx, key: StoredKeyRef): Promise<void> {
  await tx
    .deleteFrom("idempotency_keys")
    .where("api_key_id", "=", key.apiKeyId)
    .where("key", "=", key.key)
    .where(answersFilter(key))
    .execute();
}

function answersFilter(key: StoredKeyRef) {
  return key.answers
    ? sql<boolean>`response_body #>> ${key.answers.path}::text[] = ${key.answers.value}`
    : sql<boolean>`true`;
}

export interface IdempotencyRecord {
  apiKeyId: string;
  key: string;
  requestHash: string;
  /** 200 for a request that succeeded, the refusal's status for one refused (final too). */
  status: number;
  body: StoredResponse["body"];
}

/**
 * A CTE (`keys`) storing the answers of a batch's requests that carried a key, for statements that
 * write a whole batch at once; `onConflict` says what a key already stored does.
 */
export function keyRecordsCte(records: IdempotencyRecord[], onConflict: ReturnType<typeof sql>) {
  return sql`keys as (
      insert into idempotency_keys (api_key_id, key, request_hash, response_status, response_body)
      select api_key_id, key, request_hash, status, body from unnest(
        ${records.map((r) => r.apiKeyId)}::uuid[], ${records.map((r) => r.key)}::text[],
        ${records.map((r) => r.requestHash)}::text[], ${records.map((r) => r.status)}::int[],
        ${jsonbArray(records.map((r) => JSON.stringify(r.body)))}
      ) as t(api_key_id, key, request_hash, status, body)
      ${onConflict}
      returning key)`;
}
