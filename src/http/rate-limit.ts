import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Db } from "../db/database.ts";
import { type BucketRule, leaseTokens } from "../db/rate-limit-store.ts";
import { AppError, errors } from "../errors.ts";
import { limits } from "../limits.ts";

/** What one process holds of one API key's shared bucket. */
interface Held {
  /** Tokens leased and not yet spent, usable until `expiresAt`. */
  tokens: number;
  expiresAt: number;
  /** The shared bucket was empty: refused here, without asking, until then. */
  emptyUntil: number;
  leasing: Promise<void> | undefined;
}

/**
 * The per-API-key rate limit of routes marked `config: { rateLimited: true }` (money-moving ones):
 * a token bucket of `perSecond` tokens refilled continuously, with a burst of the same size, held
 * in the database (rate_limit_buckets) and so shared by every process on it.
 *
 * A process does not ask the database per request: it leases `leaseTokens` of them at a time
 * (db/rate-limit-store.ts, one statement) and spends them in memory, so a key's requests cost a
 * round trip once per lease, and a request that finds tokens in hand is decided at once, with no
 * promise. Tokens left unspent when a lease expires (`limits.rateLimitLeaseMs`) are dropped, not
 * given back. So N processes never admit more than the bucket allows, and may admit less by what
 * their leases hold unspent: at most N x leaseTokens within a lease's life (docs/design.md). When
 * the bucket is empty, the process refuses that key locally until the bucket holds a token again.
 * 0 disables the limit.
 */
export class SharedRateLimit {
  readonly #db: Db;
  readonly #rule: BucketRule;
  readonly #lease: number;
  readonly #held = new Map<string, Held>();

  constructor(db: Db, perSecond: number) {
    this.#db = db;
    this.#rule = { perSecond, burst: perSecond };
    this.#lease = leaseSize(perSecond);
  }

  /** Spends one token of `subject`: undefined when it had one, else throws 2009 (429). */
  take(subject: string): undefined | Promise<undefined> {
    const now = Date.now();
    let held = this.#held.get(subject);
    if (held === undefined) {
      if (this.#held.size >= limits.rateLimitSubjectsMax) this.#held.clear();
      held = { tokens: 0, expiresAt: 0, emptyUntil: 0, leasing: undefined };
      this.#held.set(subject, held);
    }
    if (held.tokens >= 1 && now < held.expiresAt) {
      held.tokens -= 1;
      return undefined;
    }
    if (now < held.emptyUntil) throw refusal(held.emptyUntil - now);
    const state = held;
    state.leasing ??= this.#renew(subject, state).finally(() => {
      state.leasing = undefined;
    });
    return state.leasing.then(() => this.take(subject));
  }

  async #renew(subject: string, held: Held): Promise<void> {
    const lease = await leaseTokens(this.#db, subject, this.#rule, this.#lease);
    const now = Date.now();
    held.tokens = lease.granted;
    held.expiresAt = now + limits.rateLimitLeaseMs;
    // Empty: until the bucket has refilled to one whole token.
    held.emptyUntil =
      lease.granted > 0 ? 0 : now + Math.ceil(((1 - lease.left) / this.#rule.perSecond) * 1000);
  }
}

/** A lease is a tenth of a second's tokens: ten round trips a second per busy key and process. */
export function leaseSize(perSecond: number): number {
  return Math.max(1, Math.floor(perSecond / 10));
}

function refusal(waitMs: number): AppError {
  const retryAfter = Math.max(1, Math.ceil(waitMs / 1000));
  return new AppError(errors.rateLimited, { headers: { "retry-after": String(retryAfter) } });
}

/**
 * Hooks the limit onto the rate-limited routes only, after authentication (the route's own
 * onRequest runs after the application's): other routes pay nothing for it.
 */
export function registerRateLimit(app: FastifyInstance, db: Db, perSecond: number): void {
  if (perSecond <= 0) return;
  const limit = new SharedRateLimit(db, perSecond);
  const check = (request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void) => {
    if (!request.caller) return done();
    let taken: undefined | Promise<undefined>;
    try {
      taken = limit.take(`key:${request.caller.apiKeyId}`);
    } catch (error) {
      return done(error as Error);
    }
    if (taken === undefined) return done();
    taken.then(() => done(), done);
  };
  app.addHook("onRoute", (route) => {
    if (!route.config?.rateLimited) return;
    const own = route.onRequest === undefined ? [] : [route.onRequest].flat();
    route.onRequest = [check, ...own];
  });
}
