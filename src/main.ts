import type { FastifyInstance } from "fastify";
import { type Logger, pino } from "pino";
import { buildApp } from "./app.ts";
import { type Config, ConfigError, loadConfig } from "./config.ts";
import { type AppContext, createContext } from "./context.ts";
import { openDatabase } from "./db/database.ts";
import { migrate } from "./db/migrate.ts";
import { buildAdminApp } from "./http/admin.ts";
import { trackConnections } from "./http/connections.ts";
import { loggerOptions } from "./http/logger.ts";
import { limits } from "./limits.ts";
import { countClients } from "./modules/clients/repository.ts";
import { createRootClient } from "./modules/clients/service.ts";
import { WebhookWorker } from "./modules/webhooks/worker.ts";
import { startWorkers } from "./workers.ts";

/**
 * The process entry: open the database, migrate, create the sandbox tenant on a first start,
 * listen, and shut down gracefully on SIGTERM/SIGINT (stop accepting, finish in-flight requests,
 * stop workers, close the database).
 */
export async function runServer(
  config: Config,
): Promise<{ app: FastifyInstance; admin: FastifyInstance | undefined; stop: () => Promise<void> }> {
  const logger = pino(loggerOptions(config.logLevel) as object);
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    poolSize: config.dbPoolSize,
    queryTimeoutMs: config.dbQueryTimeoutMs,
    preparedStatements: config.dbPreparedStatements,
    onPoolError: (error) => logger.warn({ err: error }, "database connection failed"),
    warn: (message) => logger.warn(message),
  });
  const replica = await openReplica(config, logger);
  const applied = await migrate(database);
  if (applied.length > 0) logger.info({ applied }, "migrations applied");
  const ctx = await createContext(config, database, (message: string) => logger.warn(message), replica);
  const shutdown = { closing: false };
  const app = await buildApp(ctx, { loggerInstance: logger, shutdown });
  const connections = trackConnections(app.server);
  await listen(app, { host: config.host, port: config.port, hostName: "HOST", portName: "PORT" });
  const admin = await startAdmin(app, ctx, config, logger);
  // After listen: a start that cannot listen (the port is taken) must not create the sandbox
  // tenant, whose password is shown only by the banner of the start that creates it.
  const firstTenant =
    config.sandbox && (await countClients(ctx.db)) === 0
      ? await createRootClient(ctx.db, {
          name: "Sandbox tenant",
          alias: "SANDBOX",
          availableCents: 100_000_000n,
          clabeBankPrefix: config.clabeBankPrefix,
        })
      : undefined;
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const base = `http://${config.host}:${port}`;
  // Started before the banner, which tells the operator (and tests) that the process is ready.
  const workers = config.workers ? startAllWorkers(ctx, logger) : undefined;
  printBanner(
    config,
    { api: base, admin: admin ? baseOf(admin, config.adminHost) : undefined },
    firstTenant ? { ...firstTenant.apiKey, clabe: firstTenant.clabe } : undefined,
  );
  const stop = stopOnce(logger, async (step) => {
    // In-flight requests (and the batches they wait for) and the rail workers' passes finish; then
    // the rails stop (the app's onClose). Webhook attempts in flight are aborted and given back
    // (same webhook-id later). The admin port answers /ready and /metrics until the database goes.
    shutdown.closing = true;
    const requests = connections.requestsInFlight();
    const closing = app.close();
    connections.closeIdle();
    await step("requests and worker passes", { requestsInFlight: requests, workers: Boolean(workers) }, () =>
      Promise.all([closing, workers?.rails.stop()]),
    );
    await step("webhook worker", { deliveriesInFlight: workers?.webhooks.inFlight ?? 0 }, async () => {
      await workers?.webhooks.stop();
    });
    if (admin) await step("admin port", {}, () => admin.close());
    await step("database", {}, () => Promise.all([database.close(), replica?.close()]));
  });
  return { app, admin, stop };
}

/** The read replica of DATABASE_READ_URL, if any: a copy, so migrations reach it by replication. */
async function openReplica(config: Config, logger: pino.Logger) {
  if (!config.databaseReadUrl) return undefined;
  return openDatabase({
    databaseUrl: config.databaseReadUrl,
    poolSize: config.dbPoolSize,
    queryTimeoutMs: config.dbQueryTimeoutMs,
    preparedStatements: config.dbPreparedStatements,
    onPoolError: (error) => logger.warn({ err: error }, "read replica connection failed"),
  });
}

/**
 * The background workers: webhook delivery, rail dispatch (SPEI orders), airtime recovery and the
 * purge of expired idempotency keys. Any number of processes may run them on one database.
 */
function startAllWorkers(ctx: AppContext, logger: Logger) {
  const webhooks = new WebhookWorker({
    db: ctx.db,
    vaultKey: ctx.keys.vault,
    log: logger.child({ worker: "webhooks" }),
    sandbox: ctx.config.sandbox,
    attempts: ctx.webhookAttempts,
  }).start();
  return { webhooks, rails: startWorkers(ctx, logger) };
}

type Step = (name: string, detail: Record<string, unknown>, work: () => Promise<unknown>) => Promise<void>;

/**
 * A shutdown that runs once however often it is asked for, and exits the process if it outlives
 * the grace period, naming the step under way so an operator sees what held it. Each step logs,
 * at info, what it waited for and how long it took; the last line gives the whole time.
 */
function stopOnce(logger: Logger, steps: (step: Step) => Promise<void>): () => Promise<void> {
  let stopping: Promise<void> | undefined;
  return () => {
    stopping ??= (async () => {
      const started = performance.now();
      let current = "requests and worker passes";
      const force = setTimeout(() => {
        logger.error({ step: current, graceMs: limits.shutdownGraceMs }, "shutdown grace exceeded; exiting");
        process.exit(1);
      }, limits.shutdownGraceMs).unref();
      logger.info({ graceMs: limits.shutdownGraceMs }, "shutdown started");
      await steps(async (name, detail, work) => {
        current = name;
        const at = performance.now();
        await work();
        logger.info({ step: name, ...detail, ms: Math.round(performance.now() - at) }, "shutdown waited");
      });
      clearTimeout(force);
      logger.info({ ms: Math.round(performance.now() - started) }, "shutdown complete");
    })();
    return stopping;
  };
}

/**
 * The admin port, when EMISOR_ADMIN_PORT is set: listening before the sandbox tenant is created,
 * so a start that cannot take it creates none (as with PORT).
 */
async function startAdmin(
  app: FastifyInstance,
  ctx: AppContext,
  config: Config,
  logger: Logger,
): Promise<FastifyInstance | undefined> {
  if (config.adminPort === undefined) return undefined;
  const admin = await buildAdminApp({
    publicApp: app,
    registry: app.metricsRegistry,
    database: ctx.database,
    loggerInstance: logger,
  });
  try {
    await listen(admin, {
      host: config.adminHost,
      port: config.adminPort,
      hostName: "EMISOR_ADMIN_HOST",
      portName: "EMISOR_ADMIN_PORT",
    });
  } catch (error) {
    await app.close();
    throw error;
  }
  return admin;
}

/**
 * Listens on HOST and PORT (or the admin pair). net's errors name neither variable ("getaddrinfo
 * ENOTFOUND x", "listen EADDRINUSE"), so the ones a setting causes are said in its terms.
 */
async function listen(
  app: FastifyInstance,
  at: { host: string; port: number; hostName: string; portName: string },
): Promise<void> {
  const { host, port, hostName, portName } = at;
  try {
    await app.listen({ host, port });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "";
    if (code === "EADDRINUSE")
      throw new ConfigError(`${portName} ${port} is already in use on ${host}: choose another ${portName}`);
    if (code === "EACCES")
      throw new ConfigError(
        `${portName} ${port} needs privileges this process lacks on ${host}: choose a ${portName} above 1023`,
      );
    if (code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "EAI_NONAME")
      throw new ConfigError(`${hostName} "${host}" does not resolve to an address of this machine (${code})`);
    if (code === "EADDRNOTAVAIL" || code === "EAFNOSUPPORT")
      throw new ConfigError(`${hostName} "${host}" is not an address of this machine (${code})`);
    throw error;
  }
}

function baseOf(app: FastifyInstance, host: string): string {
  const address = app.server.address();
  return `http://${host}:${typeof address === "object" && address ? address.port : 0}`;
}

function printBanner(
  config: Config,
  bases: { api: string; admin: string | undefined },
  tenant?: { key: string; password: string; clabe: string },
): void {
  const engine = config.databaseUrl ? "PostgreSQL (DATABASE_URL)" : `embedded PGlite in ${config.dataDir}`;
  const base = bases.api;
  const lines = [`Emisor listening on ${base} (${engine}); API docs at ${bases.admin ?? base}/docs`];
  if (bases.admin)
    lines.push(`Admin port (/metrics, /docs, /openapi.json, /health, /ready) on ${bases.admin}`);
  const key = tenant?.key ?? "<api_key>";
  const password = tenant?.password ?? "<password>";
  if (tenant) {
    lines.push(
      "A sandbox tenant was created with 1,000,000.00 MXN. Save its password now; it is not shown again:",
      `  api_key:  ${tenant.key}`,
      `  password: ${tenant.password}`,
      `  collection CLABE: ${tenant.clabe} (POST /v1/sandbox/spei/incoming simulates a transfer to it)`,
    );
  } else {
    lines.push(
      "Log in with an API key from the first start, or create one: npm run emisor -- tenant create --name 'My company'",
    );
  }
  lines.push(
    "Log in:",
    `  curl -si -X POST ${base}/v1/auth/login -H 'Content-Type: application/json' -d '{"api_client":{"api_key":"${key}","password":"${password}"}}'`,
  );
  // The banner is for the operator's terminal, not the structured log.
  process.stdout.write(`${lines.join("\n")}\n`);
}

export async function main(): Promise<void> {
  // Handlers go in before anything starts: a signal that arrived between the banner and their
  // installation would otherwise kill the process with the default action, skipping shutdown.
  // A signal during start-up is remembered and honoured once the server is up.
  let stop: (() => Promise<void>) | undefined;
  let stopRequested = false;
  const shutdown = () => {
    stopRequested = true;
    stop?.().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  // `on`, not `once`: a second signal (a relayed one, an impatient Ctrl-C) must not kill the
  // process mid-shutdown; stop() runs once and a grace timer bounds it.
  for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, shutdown);
  ({ stop } = await runServer(loadConfig()));
  if (stopRequested) shutdown();
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((error: unknown) => {
    process.stderr.write(`emisor: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
