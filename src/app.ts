import type { Server } from "node:http";
import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import Fastify, {
  type FastifyHttpOptions,
  type FastifyInstance,
  type FastifyServerOptions,
  LogController,
} from "fastify";
import type { Metric, Registry } from "prom-client";
import type { AppContext } from "./context.ts";
import { AppError, errors } from "./errors.ts";
import { registerAccessLog, registerEnvelopeCode, registerRequestIdHeader } from "./http/access-log.ts";
import { registerAnonymousBodyLimit, registerAuth } from "./http/auth.ts";
import { registerBacklogMetrics } from "./http/backlog-metrics.ts";
import {
  handleClientError,
  handleFrameworkError,
  registerErrorHandling,
  schemaErrorMessage,
} from "./http/error-handler.ts";
import { registerHealth } from "./http/health.ts";
import { registerJsonBody } from "./http/json-body.ts";
import { loggerOptions, requestIdOf, requestLoggerFactory } from "./http/logger.ts";
import { registerMetrics, serveMetrics } from "./http/metrics.ts";
import { openApiOptions } from "./http/openapi.ts";
import { parseQuery } from "./http/querystring.ts";
import { registerRateLimit } from "./http/rate-limit.ts";
import { registerStrictQuery, validatorCompiler } from "./http/validation.ts";
import { registerIdempotency } from "./idempotency/hook.ts";
import { limits } from "./limits.ts";
import { registerAirtimeRoutes } from "./modules/airtime/routes.ts";
import { registerAuthRoutes } from "./modules/auth/routes.ts";
import { registerCardholderRoutes } from "./modules/cardholders/routes.ts";
import { registerCardRoutes } from "./modules/cards/routes.ts";
import { registerCatalogRoutes } from "./modules/catalogs/routes.ts";
import { registerClientRoutes } from "./modules/clients/routes.ts";
import { registerSpendingControlRoutes } from "./modules/controls/routes.ts";
import { registerDecisionRoutes } from "./modules/decisions/routes.ts";
import { registerEventMetrics } from "./modules/events/metrics.ts";
import { registerEventRoutes } from "./modules/events/routes.ts";
import { registerKeyRoutes } from "./modules/keys/routes.ts";
import { registerPaymentRoutes } from "./modules/payments/routes.ts";
import { registerProductRoutes } from "./modules/products/routes.ts";
import { registerPurchaseRoutes } from "./modules/purchases/routes.ts";
import { registerCardNetworkRoutes, registerRailRoutes } from "./modules/rails/routes.ts";
import { registerSandboxRoutes } from "./modules/sandbox/routes.ts";
import { registerTransferRoutes } from "./modules/transfers/routes.ts";
import { registerWebhookRoutes } from "./modules/webhooks/routes.ts";

export interface BuildOptions {
  /** A pino logger configuration, a ready logger instance, or false. */
  logger?: FastifyServerOptions["logger"] | false;
  loggerInstance?: FastifyServerOptions["loggerInstance"];
  /** How long a request (headers and body) may take to arrive; tests shorten it. */
  requestArrivalMs?: number;
  /** Set `closing` when the process starts shutting down: requests arriving after are not run. */
  shutdown?: { closing: boolean };
}

/** The server's options: its logger, limits, timeouts, and the handlers that answer in the envelope. */
function serverOptions(ctx: AppContext, options: BuildOptions): FastifyHttpOptions<Server> {
  const arrivalMs = options.requestArrivalMs ?? limits.requestArrivalMs;
  return {
    ...(options.loggerInstance
      ? { loggerInstance: options.loggerInstance }
      : { logger: options.logger ?? loggerOptions(ctx.config.logLevel) }),
    bodyLimit: limits.bodyBytesMax,
    // A request must have arrived, body included, within this time (then 408, 1008, and the
    // connection is closed). Fastify turns Node's own limit off by default, so a body sent a byte
    // at a time held its connection (and a shutdown) for ever. Node checks every connection this
    // often, so the answer comes within about 1.25 times the limit.
    requestTimeout: arrivalMs,
    http: {
      headersTimeout: arrivalMs,
      connectionsCheckingInterval: Math.max(50, Math.floor(arrivalMs / 4)),
      // Node answers a missing Host with a bare 400 of its own; the auth hook refuses it instead,
      // in the envelope (http/auth.ts).
      requireHostHeader: false,
    },
    requestIdHeader: false,
    genReqId: requestIdOf,
    childLoggerFactory: requestLoggerFactory,
    trustProxy: ctx.config.trustProxy,
    // Per-request "incoming/completed" lines only at debug: at volume they cost more than the work.
    logController: new LogController({
      disableRequestLogging: ctx.config.logLevel !== "debug" && ctx.config.logLevel !== "trace",
    }),
    // Fastify's own 503 while closing has its own body; in-flight requests finish instead.
    return503OnClosing: false,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 200, querystringParser: parseQuery },
    // Router errors (bad percent-encoding, over-long path parameter) answer as envelopes too.
    frameworkErrors: handleFrameworkError,
    clientErrorHandler: handleClientError,
    schemaErrorFormatter: schemaErrorMessage,
  };
}

/** The app's metrics and the process's own (its context's counters, the database's backlogs). */
function registerAllMetrics(app: FastifyInstance, ctx: AppContext): Registry {
  const metrics = registerMetrics(app);
  registerEventMetrics(metrics, ctx.db);
  registerBacklogMetrics(metrics, ctx.db);
  const own: Metric<string>[] = [
    ctx.paymentCounters.batches,
    ctx.paymentCounters.payments,
    ctx.paymentCounters.sharing,
    ctx.webhookAttempts,
    ctx.cardMessages.counters.messages,
    ctx.cardMessages.counters.decisions,
    ctx.cardMessages.counters.batches,
    ctx.cardMessages.counters.decisionCalls,
    ctx.cardMessages.counters.decisionSeconds,
  ];
  for (const metric of own) metrics.registerMetric(metric);
  return metrics;
}

/**
 * Builds the HTTP application: infrastructure first (docs, errors, auth, idempotency, metrics,
 * health), then every module, registered by hand so the whole API surface reads here.
 */
export async function buildApp(ctx: AppContext, options: BuildOptions = {}): Promise<FastifyInstance> {
  const app = Fastify(serverOptions(ctx, options)).withTypeProvider<TypeBoxTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  // JSON only: Fastify would otherwise parse text/plain bodies into strings instead of a 415.
  app.removeContentTypeParser("text/plain");
  registerJsonBody(app);

  // First, so that the plugins' own routes (/docs) answer their errors in the envelope too: a
  // plugin's context keeps the error handler of the moment it is registered.
  registerErrorHandling(app);
  registerAnonymousBodyLimit(app);
  registerRequestIdHeader(app);
  registerEnvelopeCode(app);
  // A request that arrives once shutdown has begun (the next one on a keep-alive connection, sent
  // before the client saw the connection close) is answered 6002 and not run: run, it could
  // commit and then find its connection closed, and the caller would pay again on retry.
  const shutdown = options.shutdown;
  if (shutdown) {
    app.addHook("onRequest", (_request, reply, done) => {
      if (!shutdown.closing) return done();
      reply.header("connection", "close");
      // Retry-After: another instance, or this one restarted, takes it at once.
      done(new AppError(errors.shuttingDown, { headers: { "retry-after": "1" } }));
    });
  }
  // With an admin port the reference and the metrics are served there only (http/admin.ts); the
  // document is still generated here, from this app's routes.
  const operatorRoutesHere = ctx.config.adminPort === undefined;
  await app.register(swagger, openApiOptions);
  if (operatorRoutesHere) {
    await app.register(swaggerUi, { routePrefix: "/docs" });
    app.get("/openapi.json", { config: { auth: false }, schema: { hide: true } }, async () => app.swagger());
  }

  registerAuth(app, ctx.auth);
  registerRateLimit(app, ctx.db, ctx.config.rateLimitPerSecond);
  registerIdempotency(app, ctx.db, ctx.keys.idempotency);
  const metrics = registerAllMetrics(app, ctx);
  app.decorate("metricsRegistry", metrics);
  if (operatorRoutesHere) serveMetrics(app, metrics);
  registerHealth(app, ctx.database);
  registerStrictQuery(app);
  registerAccessLog(app);

  registerAuthRoutes(app, ctx);
  registerKeyRoutes(app, ctx);
  registerCatalogRoutes(app);
  registerProductRoutes(app, ctx);
  registerCardRoutes(app, ctx);
  registerPaymentRoutes(app, ctx);
  registerClientRoutes(app, ctx);
  registerDecisionRoutes(app, ctx);
  registerCardholderRoutes(app, ctx);
  registerSandboxRoutes(app, ctx);
  registerEventRoutes(app, ctx);
  registerWebhookRoutes(app, ctx);
  registerTransferRoutes(app, ctx);
  app.register(async (scope) => registerRailRoutes(scope, ctx));
  app.register(async (scope) => registerCardNetworkRoutes(scope, ctx));
  registerPurchaseRoutes(app, ctx);
  registerSpendingControlRoutes(app, ctx);
  registerAirtimeRoutes(app, ctx);

  // Rail adapters stop their timers, and the decryption workers their threads, with the app.
  app.addHook("onClose", async () => {
    await Promise.all([ctx.rails.close(), ctx.systemKey.close()]);
  });
  await app.ready();
  return app;
}
