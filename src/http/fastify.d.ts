import "fastify";
import type { IdempotencyScope } from "../db/idempotency.ts";
import type { Caller } from "./caller.ts";

declare module "fastify" {
  interface FastifyRequest {
    /** The authenticated caller; set by the auth hook on every route not marked `auth: false`. */
    caller: Caller;
    /** Set when an idempotent route received an Idempotency-Key header. */
    idempotency: IdempotencyScope | undefined;
    /** The exact bytes of a signed rail callback's body (set only on /v1/rails routes). */
    rawBody: Buffer | undefined;
  }
  interface FastifyContextConfig {
    /** false: the route needs no bearer token (login, health). Default true under /v1. */
    auth?: boolean;
    /** true: the route honours Idempotency-Key. */
    idempotent?: boolean;
    /**
     * true: the route's own work finds a stored answer for the key, under the locks it takes
     * anyway (payments: the batcher), so the hook only checks the key and fingerprints the
     * request, and a first attempt costs no lookup of its own.
     */
    replaysUnderLock?: boolean;
    /** true: the route counts against the per-API-key rate limit. */
    rateLimited?: boolean;
  }
}
