import type { Db, Tx } from "../db/database.ts";
import { isOutcomeUnknown } from "../db/failures.ts";
import { AppError } from "../errors.ts";
import { type IdempotentResult, isFinalRefusal, okReply, refusalResponse } from "./reply.ts";
import { findStoredResponse, type IdempotencyScope, recordResponse } from "./store.ts";

/**
 * Run-once for ordinary writes. The first answer for an (API key, Idempotency-Key) pair is stored
 * IN THE SAME TRANSACTION as the change it reports, so a crash leaves either both or neither. A
 * concurrent duplicate blocks on the primary key until the first commits, then finds the key
 * taken: its own transaction rolls back and it answers with the stored response. A refusal of the
 * work itself (a 4xx decided on the data: insufficient balance, a card that cannot be paid) is
 * stored too and replayed: once a client is told no, a duplicate still in flight (an attempt it
 * gave up on) must not move the money later. Failures that say nothing about the request
 * (validation before the work, 409 for a reused key, 429, 5xx such as 503) are not stored: a retry
 * is evaluated again.
 */
class KeyTaken extends Error {}

export interface RunOptions<T> {
  /** The success envelope's message ("OK" unless given). */
  message?: string;
  /**
   * What is kept for replays instead of the data: a secret shown once (a webhook signing secret)
   * must not be stored in clear, so its replay carries the data without it.
   */
  stored?: (data: T) => unknown;
}

/**
 * Runs `work` in a transaction and answers its data (200, the success envelope), recorded under
 * the key when one is given. When the work fails and a duplicate with the same key committed
 * meanwhile, the duplicate's response is the answer: its change is what made this one fail (the
 * cardholder it created now holds the unique rfc, the balance it spent is gone), and the client
 * asked for that change once.
 */
export async function runIdempotent<T>(
  db: Db,
  scope: IdempotencyScope | undefined,
  work: (tx: Tx) => Promise<T>,
  options: RunOptions<T> = {},
): Promise<IdempotentResult> {
  const { message, stored: storedData } = options;
  if (!scope) return { ...okReply(await db.transaction().execute(work), message), replayed: false };
  try {
    return await db.transaction().execute(async (tx) => {
      const data = await work(tx);
      const response = okReply(data, message);
      const stored = storedData ? okReply(storedData(data), message) : response;
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
