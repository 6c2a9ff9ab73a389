import type { FastifyInstance } from "fastify";
import type { Static } from "typebox";
import { Type } from "typebox";
import type { AppContext } from "../../context.ts";
import { noStore, ok } from "../../http/envelope.ts";
import { TooManyRequests } from "../../http/openapi.ts";
import type { Operation } from "../../http/operation.ts";
import { bearerAuth, NoStoreHeader, responses } from "../../http/schemas.ts";
import { toPesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import { findClientInScope } from "../clients/repository.ts";
import { LoginBody, LoginData } from "./schemas.ts";

const loginRoute: Operation = (app, ctx) => {
  app.post<{ Body: Static<typeof LoginBody> }>(
    "/v1/auth/login",
    {
      config: { auth: false },
      bodyLimit: limits.loginBodyBytesMax,
      schema: {
        tags: ["auth"],
        operationId: "login",
        summary: "Log in with an API key and password",
        description:
          "Returns a bearer token in the Authorization response header and in data. Unknown key and wrong password answer the same 2005; failed logins are rate limited per IP (2007) and lock the key after repeated failures (2008).",
        body: LoginBody,
        response: {
          ...responses(LoginData, {
            headers: {
              Authorization: {
                type: "string",
                pattern: "^Bearer [A-Za-z0-9_.-]+$",
                description:
                  "Bearer <token>: the token data.token holds, for the Authorization header of later requests.",
              },
              ...NoStoreHeader,
            },
          }),
          // Failed logins are limited by address (2007) and lock the key (2008), with Retry-After.
          429: TooManyRequests,
        },
      },
    },
    async (request, reply) => {
      const { api_key, password } = request.body.api_client;
      const login = await ctx.auth.login(api_key, password, request.ip);
      const client = await findClientInScope(ctx.db, login.clientId, login.clientId);
      if (!client) throw new Error("logged-in client vanished");
      noStore(reply).header("authorization", `Bearer ${login.token}`);
      return ok({
        token: login.token,
        token_type: "Bearer" as const,
        expires_in: login.expiresIn,
        client: {
          id: client.id,
          code: client.code,
          name: client.name,
          alias: client.alias,
          email: client.email,
          available: toPesos(client.balance_cents),
          balance: toPesos(client.balance_cents),
          timezone: client.timezone,
          status: client.status,
          created_at: client.created_at.toISOString(),
          updated_at: client.updated_at.toISOString(),
          token: login.token,
        },
      });
    },
  );
};

const logoutRoute: Operation = (app, ctx) => {
  app.post(
    "/v1/auth/logout",
    {
      schema: {
        tags: ["auth"],
        operationId: "logout",
        summary: "Revoke the bearer token of this request",
        security: bearerAuth,
        response: responses(Type.Null()),
      },
    },
    async (request) => {
      await ctx.auth.logout(request.caller);
      return ok(null);
    },
  );
};

export function registerAuthRoutes(app: FastifyInstance, ctx: AppContext): void {
  for (const operation of [loginRoute, logoutRoute]) operation(app, ctx);
}
