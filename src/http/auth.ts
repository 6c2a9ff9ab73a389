import type { FastifyInstance } from "fastify";
import type { AuthService } from "../modules/auth/service.ts";

/**
 * Every /v1 route requires a bearer token unless it is marked `config: { auth: false }`.
 * Authentication runs before the body is parsed, so anonymous callers cost no parsing.
 */
export function registerAuth(app: FastifyInstance, auth: AuthService): void {
  app.decorateRequest("caller", null as never);
  app.decorateRequest("idempotency", undefined);
  app.addHook("onRequest", async (request) => {
    if (request.routeOptions.config.auth === false || !request.routeOptions.url?.startsWith("/v1/")) return;
    request.caller = await auth.authenticate(request.headers.authorization);
  });
}
