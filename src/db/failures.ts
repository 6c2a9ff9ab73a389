/**
 * How a database failure is told apart: the server or the connection went away (the request can
 * be retried), and whether a write may have been applied although its answer never came.
 */

// Connection-level failures of PostgreSQL (class 08, shutdown 57P0x, too many connections) and
// node-postgres' own messages for a pool that cannot connect or a socket that died.
const unavailableSqlStates = new Set([
  "08000",
  "08001",
  "08003",
  "08004",
  "08006",
  "57P01",
  "57P02",
  "57P03",
  "53300",
]);
const unavailableSocketCodes = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EHOSTUNREACH",
]);
// Statement timeout, serialization failure and deadlock that survived retries: transient.
const transientSqlStates = new Set(["57014", "40001", "40P01"]);

export function isDatabaseUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && (unavailableSqlStates.has(code) || unavailableSocketCodes.has(code)))
    return true;
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection ended unexpectedly|Client was closed and is not queryable|Query read timeout/i.test(
    error.message,
  );
}

export function isTransientDatabaseError(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === "string" && transientSqlStates.has(code);
}

const outcomeUnknown = Symbol("emisor.outcomeUnknown");

/** Marks a connection failure after which the server may have committed the work. */
export function markOutcomeUnknown(error: unknown): void {
  if (error instanceof Error) Object.defineProperty(error, outcomeUnknown, { value: true });
}

/**
 * True when the connection died while a COMMIT, or a write outside any transaction, was in
 * flight: the server may have applied it. Anything earlier in a transaction was certainly rolled
 * back (a transaction commits only on COMMIT), and a connection that could not be had ran nothing.
 */
export function isOutcomeUnknown(error: unknown): boolean {
  return error instanceof Error && (error as { [outcomeUnknown]?: boolean })[outcomeUnknown] === true;
}

/** SQLSTATE of `emisor_require` (migration 0008): a statement's checks failed and it wrote nothing. */
export const decisionRefused = "EM001";

const rolledBackCodes = new Set([decisionRefused, "40P01", "40001", "23505"]);

/**
 * A batch statement that failed this way wrote nothing and can be split: a check refused it, it
 * lost a deadlock or a serialization race, or a unique key was taken. Each item then runs alone.
 */
export function batchWroteNothing(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" && rolledBackCodes.has(code);
}
