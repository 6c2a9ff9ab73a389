import type { FastifyInstance } from "fastify";
import type { AuthService } from "../modules/auth/service.ts";
import type { Caller } from "./caller.ts";

/**
 * Every /v1 route requires a bearer token unless it is marked `config: { auth: false }`.
 * Authentication runs before the body is parsed, so anonymous callers cost no parsing.
 */
export function registerAuth(app: FastifyInstance, auth: AuthService): void {
  app.decorateRequest("caller", null as never);
  app.decorateRequest("idempotency", undefined);
  app.decorateRequest("idempotencyDraft", undefined);
  // A callback, not an async function: a caller known at once costs no promise.
  app.addHook("onRequest", (request, _reply, done) => {
    if (request.routeOptions.config.auth === false || !request.routeOptions.url?.startsWith("/v1/"))
      return done();
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
}
