import { createHmac } from "node:crypto";
import { sql } from "kysely";
import { AppError, errors } from "../errors.ts";
import { type Envelope, failure } from "../http/envelope.ts";
import { limits } from "../limits.ts";
import type { Db, Queryable, Tx } from "./database.ts";
import { isOutcomeUnknown } from "./failures.ts";

/**
 * Exactly-once for money-moving and creating requests. The first successful response for an
 * (API key, Idempotency-Key) pair is stored IN THE SAME TRANSACTION as the change it reports, so
 * a crash leaves either both or neither. A concurrent duplicate blocks on the primary key until
 * the first commits, then finds the key taken: its own transaction rolls back and it answers
 * with the stored response. A refusal of the work itself (a 4xx decided on the data: insufficient
 * balance, a card that cannot be paid) is stored too and replayed, as at Stripe: once a client is
 * told no, a duplicate still in flight (an attempt it gave up on) must not move the money later.
 * Failures that say nothing about the request (validation before the work, 409 for a reused key,
 * 429, 5xx such as 503) are not stored: a retry is evaluated again.
 *
 * A key is kept `limits.idempotencyKeyTtlHours` (48 h). Past that it is gone whether or not the
 * purge (workers.ts) has deleted its row yet: the lookups see only keys younger than the retention,
 * and storing a key takes over the row of an expired one, so what a client gets never depends on
 * when the purge last ran.
 */
export interface IdempotencyScope {
  apiKeyId: string;
  key: string;
  requestHash: string;
  /**
   * The fingerprint in the forms releases before the third audit computed it, over the URL's path
   * instead of the route and its decoded parameters: the whole body, and on routes with ciphered
   * fields the rest of the body completed with what they named. A key stored by such a release,
   * up to 48 hours before an upgrade, still replays instead of answering 4001. Never stored;
   * computed only when the current form does not match.
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

export interface StoredResponse {
  status: number;
  body: Envelope;
}

export interface IdempotentResult extends StoredResponse {
  replayed: boolean;
}

class KeyTaken extends Error {}

/**
 * Runs `work` in a transaction, recording its response under the key when one is given. When the
 * work fails and a duplicate with the same key committed meanwhile, the duplicate's response is
 * the answer: its change is what made this one fail (the cardholder it created now holds the
 * unique rfc, the balance it spent is gone), and the client asked for that change once.
 *
 * `storedBody` changes what is kept for replays: a secret shown once (a webhook signing secret)
 * must not be stored in clear, so its replay carries the response without it.
 */
export async function runIdempotent(
  db: Db,
  scope: IdempotencyScope | undefined,
  work: (tx: Tx) => Promise<StoredResponse>,
  options: { storedBody?: (body: Envelope) => Envelope } = {},
): Promise<IdempotentResult> {
  if (!scope) return { ...(await db.transaction().execute(work)), replayed: false };
  try {
    return await db.transaction().execute(async (tx) => {
      const response = await work(tx);
      const stored = options.storedBody ? { ...response, body: options.storedBody(response.body) } : response;
      if (!(await recordResponse(tx, scope, stored))) throw new KeyTaken();
      return { ...response, replayed: false };
    });
  } catch (error) {
    let lookupFailure: unknown;
    const stored = await findStoredResponse(db, scope).catch((lookupError: unknown) => {
      // A 4001 (another body under this key) is the answer; a failed lookup is not.
      if (lookupError instanceof AppError) throw lookupError;
      lookupFailure = lookupError;
      return undefined;
    });
    if (stored) return stored;
    // The lookup failed (the database went away in between): whether a duplicate committed is
    // unknown, so that failure is the answer (503: retry with the key), or the work's own when it
    // may have committed (504). Not a 4xx the work raised (insufficient funds, caused by the
    // duplicate's debit, would tell a careful client the money did not move when it did), nor a
    // vanished key (500).
    if (lookupFailure !== undefined) throw isOutcomeUnknown(error) ? error : lookupFailure;
    if (error instanceof KeyTaken) throw new Error("idempotency key vanished after a conflict");
    return answerRefusal(db, scope, error);
  }
}

/**
 * A check an operation makes before its idempotent work, outside that work's transaction (a
 * card's status read before its PIN is checked): a final refusal it throws is the key's answer
 * as the work's own refusals are. Answers the check's result, or the stored answer of a
 * duplicate that succeeded meanwhile (`{ stored }`).
 */
export async function checkBeforeWork<T>(
  db: Db,
  scope: IdempotencyScope | undefined,
  check: () => Promise<T>,
): Promise<{ value: T } | { stored: IdempotentResult }> {
  try {
    return { value: await check() };
  } catch (error) {
    if (!scope) throw error;
    return { stored: await answerRefusal(db, scope, error) };
  }
}

/**
 * Throws `error`, recorded first as the key's answer when it is a final refusal; unless a
 * duplicate's success committed meanwhile under the key: that answer is returned instead.
 */
async function answerRefusal(db: Db, scope: IdempotencyScope, error: unknown): Promise<IdempotentResult> {
  if (!isFinalRefusal(error)) throw error;
  if (await recordResponse(db, scope, refusalResponse(error))) throw error;
  const winner = await findStoredResponse(db, scope);
  if (winner) return winner;
  throw error;
}

/** A 4xx the work decided (not a reused key, not a rate limit): the final answer for its key. */
export function isFinalRefusal(error: unknown): error is AppError {
  return (
    error instanceof AppError &&
    error.def.status >= 400 &&
    error.def.status < 500 &&
    !error.def.transient &&
    error.def !== errors.idempotencyKeyReused
  );
}

/** A refusal as its replay answers it: the same status and envelope as the first answer. */
export function refusalResponse(error: AppError): StoredResponse {
  return { status: error.def.status, body: failure(error.def, error.message, error.details) };
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
  return { status: row.response_status, body: row.response_body as Envelope, replayed: true };
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

/** Canonical JSON (sorted keys), so the same body in another key order is the same request. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/**
 * The stored fingerprint of a request. Keyed (HMAC under a key derived from the master key): a
 * body can hold a new API key's password or a PIN, and a plain hash of an otherwise guessable
 * body would let whoever reads the table test guesses of it at hash speed.
 */
export function requestHash(key: Buffer, method: string, path: string, body: unknown): string {
  return createHmac("sha256", key)
    .update(`${method} ${path}\n${canonicalJson(body)}`)
    .digest("hex");
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
  body: Envelope;
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
        ${records.map((r) => JSON.stringify(r.body))}::jsonb[]
      ) as t(api_key_id, key, request_hash, status, body)
      ${onConflict}
      returning key)`;
}
