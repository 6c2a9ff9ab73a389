import { AppError, errors } from "../errors.ts";
import { type Envelope, failure, ok } from "../http/envelope.ts";

/**
 * A reply as a key keeps it and replays it: its status and its rendered envelope. The idempotency
 * layer renders it (the reply is stored in the transaction of the work it reports, before any
 * route sees it); services hand it their data and never build one.
 */
export interface StoredResponse {
  status: number;
  body: Envelope;
}

export interface IdempotentResult extends StoredResponse {
  replayed: boolean;
}

/** How an operation's data is answered: 200 with the success envelope (`message`, "OK" unless given). */
export function okReply(data: unknown, message?: string): StoredResponse {
  return { status: 200, body: ok(data, message) };
}

/** The data answered now, not replayed: what work done outside `runIdempotent` answers. */
export function answered(data: unknown, message?: string): IdempotentResult {
  return { ...okReply(data, message), replayed: false };
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
