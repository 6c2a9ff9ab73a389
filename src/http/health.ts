import type { FastifyInstance } from "fastify";
import type { Database } from "../db/database.ts";

/** Liveness (the process answers) and readiness (the database answers within a second). */
export function registerHealth(app: FastifyInstance, database: Database): void {
  app.get("/health", { config: { auth: false }, schema: { hide: true } }, async () => ({ status: "ok" }));
  app.get("/ready", { config: { auth: false }, schema: { hide: true } }, async (_request, reply) => {
    const ready = await database.ping(1000);
    return reply.code(ready ? 200 : 503).send({ status: ready ? "ready" : "database unavailable" });
  });
}
