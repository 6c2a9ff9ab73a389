import "fastify";
import type { Registry } from "prom-client";
import type { IdempotencyDraft, IdempotencyScope } from "../idempotency/store.ts";
import type { Caller } from "./caller.ts";

declare module "fastify" {
  interface FastifyInstance {
    /** The public app's metrics, which /metrics serves here or on the admin app. */
    metricsRegistry: Registry;
  }
  interface FastifyRequest {
    /** The authenticated caller; set by the auth hook on every route not marked `auth: false`. */
    caller: Caller;
    /** Set when an idempotent route received an Idempotency-Key header. */
    idempotency: IdempotencyScope | undefined;
    /** Instead of `idempotency` on routes with `cipheredFields`: the service completes it. */
    idempotencyDraft: IdempotencyDraft | undefined;
    /** The exact bytes of a signed rail callback's body (set only on /v1/rails routes). */
    rawBody: Buffer | undefined;
    /** The code of the envelope answered (access-log.ts), once it is being sent. */
    envelopeCode: number | undefined;
  }
  interface FastifyContextConfig {
    /** false: the route needs no bearer token (login, health). Default true under /v1. */
    auth?: boolean;
    /** true: the route honours Idempotency-Key. */
    idempotent?: boolean;
    /**
     * Body fields that may hold ciphered values: left out of the hook's fingerprint, which the
     * service completes once it has deciphered them (request.idempotencyDraft).
     */
    cipheredFields?: readonly string[];
    /** true: the route counts against the per-API-key rate limit. */
    rateLimited?: boolean;
  }
}
