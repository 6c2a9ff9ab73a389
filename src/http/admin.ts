import swagger, { type StaticDocumentSpec } from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import Fastify, { type FastifyInstance, type FastifyServerOptions } from "fastify";
import type { Registry } from "prom-client";
import type { Database } from "../db/database.ts";
import { registerErrorHandling } from "./error-handler.ts";
import { registerHealth } from "./health.ts";
import { serveMetrics } from "./metrics.ts";

/**
 * The admin app, on EMISOR_ADMIN_PORT: what operators and their tools read, kept off the port the
 * API's callers reach. /metrics (the public app's registry: its requests are counted there),
 * /health and /ready (the same checks as the public port's, which keeps them for its load
 * balancer), and the API reference (/openapi.json, /docs) as the public app generated it. Its
 * own requests are neither counted nor access-logged: a scrape every few seconds would drown the
 * requests the log is for.
 */
export async function buildAdminApp(options: {
  publicApp: FastifyInstance;
  registry: Registry;
  database: Database;
  loggerInstance?: FastifyServerOptions["loggerInstance"];
}): Promise<FastifyInstance> {
  const admin = Fastify({
    ...(options.loggerInstance ? { loggerInstance: options.loggerInstance } : { logger: false }),
    disableRequestLogging: true,
    requestIdHeader: false,
    return503OnClosing: false,
  });
  registerErrorHandling(admin);
  // An OpenAPI 3.1 document (http/openapi.ts), which the plugin's types know only as 3.0.
  const document = options.publicApp.swagger() as StaticDocumentSpec["document"];
  await admin.register(swagger, { mode: "static", specification: { document } });
  await admin.register(swaggerUi, { routePrefix: "/docs" });
  admin.get("/openapi.json", { schema: { hide: true } }, async () => document);
  serveMetrics(admin, options.registry);
  registerHealth(admin, options.database);
  await admin.ready();
  return admin;
}
