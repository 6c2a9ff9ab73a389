import type { FastifyInstance } from "fastify";
import { runAsTenant } from "../db/tenant-scope.ts";
import { AppError, errors, invalidField } from "../errors.ts";
import { limits } from "../limits.ts";
import type { AuthService } from "../modules/auth/service.ts";
import type { Caller } from "./caller.ts";
import { malformedQueryPart } from "./querystring.ts";

/**
 * Routes that need no token (outside /v1, or marked `auth: false`) take a small body unless they
 * set their own limit: what an anonymous caller sends is parsed and validated before anything
 * else is known about it. Registered before any route.
 */
export function registerAnonymousBodyLimit(app: FastifyInstance): void {
  app.addHook("onRoute", (route) => {
    if (route.url.startsWith("/v1/") && route.config?.auth !== false) return;
    route.bodyLimit ??= limits.anonymousBodyBytesMax;
  });
}

/**
 * Every /v1 route requires a bearer token unless it is marked `config: { auth: false }`.
 * Authentication runs before the body is parsed, so anonymous callers cost no parsing. The same
 * hook refuses an HTTP/1.1 request without a Host header, and one whose query string is not
 * percent-encoded UTF-8.
 */
export function registerAuth(app: FastifyInstance, auth: AuthService): void {
  app.decorateRequest("caller", null as never);
  app.decorateRequest("idempotency", undefined);
  app.decorateRequest("idempotencyDraft", undefined);
  // A callback, not an async function: a caller known at once costs no promise.
  app.addHook("onRequest", (request, _reply, done) => {
    // HTTP/1.1 requires Host (RFC 9112 3.2); Node's own check would answer outside the envelope.
    if (request.headers.host === undefined && request.raw.httpVersion === "1.1") {
      return done(new AppError(errors.validationFailed, { message: "The Host header is required" }));
    }
    // Only the API reads a query string; /docs and /health ignore theirs.
    if (!request.routeOptions.url?.startsWith("/v1/")) return done();
    const malformed = malformedQueryPart(request.query);
    if (malformed !== undefined) {
      return done(invalidField(malformed, "encoding", "the query string must be percent-encoded UTF-8"));
    }
    if (request.routeOptions.config.auth === false) return done();
    let caller: Caller | Promise<Caller>;
    try {
      caller = auth.authenticate(request.headers.authorization);
    } catch (error) {
      return done(error as Error);
    }
    if (!(caller instanceof Promise)) {
      request.caller = caller;
      return done();
    }
    caller.then((known) => {
      request.caller = known;
      done();
    }, done);
  });
  // After the body is read (its stream's events run outside any scope): the rest of the request,
  // its database turns included, counts as its tenant's. A request with no caller counts as its
  // route's (logins, each rail's callbacks), so none of those crowds out another or the workers.
  app.addHook("preHandler", (request, _reply, done) => {
    runAsTenant(request.caller ? request.caller.rootId : `route:${request.routeOptions.url ?? ""}`, done);
  });
}
