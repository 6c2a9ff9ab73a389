import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import pg from "pg";
import { pino } from "pino";
import { buildApp } from "../../src/app.ts";
import { type Config, loadConfig } from "../../src/config.ts";
import { type AppContext, createContext } from "../../src/context.ts";
import { type Database, openDatabase } from "../../src/db/database.ts";
import { migrate, readMigrations } from "../../src/db/migrate.ts";
import { loggerOptions } from "../../src/http/logger.ts";
import { recordTraffic, writeSecrets } from "./secrets.ts";

/**
 * One isolated Emisor per test file: its own database (a new PostgreSQL database when
 * DATABASE_URL is set, else an in-memory PGlite cloned from a migrated template), the real app,
 * and logs written to test-logs/ so that a test can check no secret ever reached them.
 */
export interface TestApp {
  app: FastifyInstance;
  ctx: AppContext;
  database: Database;
  engine: Database["engine"];
  config: Config;
  /** PostgreSQL only: the URL of this file's database (for subprocesses). */
  databaseUrl: string | undefined;
  close(): Promise<void>;
}

export const testLogDir = path.resolve(".emisor/test-logs");

/** Every log line this test process wrote (its apps' pino files; not the recorded responses). */
export function ownLogs(): string {
  const mine = new RegExp(`^${process.pid}-\\d+\\.log$`);
  return readdirSync(testLogDir)
    .filter((name) => mine.test(name))
    .map((name) => readFileSync(path.join(testLogDir, name), "utf8"))
    .join("\n");
}

let lastLogStamp = 0;

/** A log file of its own for each app of this process, named as `ownLogs` and the post-suite scan read. */
function newLogFile(): string {
  mkdirSync(testLogDir, { recursive: true });
  lastLogStamp = Math.max(Date.now(), lastLogStamp + 1);
  return path.join(testLogDir, `${process.pid}-${lastLogStamp}.log`);
}

export async function startTestApp(overrides: Partial<Config> = {}): Promise<TestApp> {
  const fresh = await freshDatabase();
  const config: Config = {
    ...loadConfig({}),
    databaseUrl: fresh.url,
    dataDir: path.join(tmpdir(), `emisor-test-${process.pid}`),
    masterKey: randomBytes(32).toString("hex"),
    logLevel: "debug",
    authCacheSeconds: 0,
    ...overrides,
  };
  await migrate(fresh.database);
  const ctx = await createContext(config, fresh.database, () => {});
  const logFile = newLogFile();
  const logger = pino(loggerOptions("debug") as object, pino.destination({ dest: logFile, sync: true }));
  const app = await buildApp(ctx, { loggerInstance: logger });
  const base = logFile.replace(/\.log$/, "");
  const traffic = recordTraffic(app, base);
  return {
    app,
    ctx,
    database: fresh.database,
    engine: fresh.database.engine,
    config,
    databaseUrl: fresh.url,
    close: async () => {
      await writeSecrets(ctx, base, traffic, fresh.url);
      await app.close();
      await fresh.database.close();
      await fresh.drop();
    },
  };
}

/**
 * Another Emisor over the database of `first`, as a second process behind a load balancer would
 * be: its own context (and with it its own per-process memory) and app, with `first`'s
 * configuration. On PostgreSQL it has its own pool of connections to the same database; PGlite
 * runs inside one process, so there the two share its one handle. Close it before `first`, which
 * drops the database.
 */
export async function startSecondApp(first: TestApp): Promise<TestApp> {
  const database = first.databaseUrl
    ? await openDatabase({ databaseUrl: first.databaseUrl, poolSize: 10 })
    : first.database;
  const ctx = await createContext(first.config, database, () => {});
  const logFile = newLogFile();
  const logger = pino(loggerOptions("debug") as object, pino.destination({ dest: logFile, sync: true }));
  const app = await buildApp(ctx, { loggerInstance: logger });
  const traffic = recordTraffic(app, logFile.replace(/\.log$/, ""));
  return {
    app,
    ctx,
    database,
    engine: database.engine,
    config: first.config,
    databaseUrl: first.databaseUrl,
    close: async () => {
      await writeSecrets(ctx, logFile.replace(/\.log$/, ""), traffic, first.databaseUrl);
      await app.close();
      if (database !== first.database) await database.close();
    },
  };
}

interface FreshDatabase {
  database: Database;
  url: string | undefined;
  drop(): Promise<void>;
}

/** A new, migrated database for one test file. */
export async function freshDatabase(): Promise<FreshDatabase> {
  const baseUrl = process.env.DATABASE_URL;
  if (baseUrl) return freshPostgres(baseUrl);
  const database = await openDatabase({ loadDataDir: await pgliteTemplate() });
  return { database, url: undefined, drop: async () => {} };
}

async function freshPostgres(baseUrl: string): Promise<FreshDatabase> {
  const name = `emisor_t_${process.pid}_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  const database = await openDatabase({ databaseUrl: url.toString(), poolSize: 10 });
  await migrate(database);
  return {
    database,
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: baseUrl });
      await client.connect();
      await client.query(`drop database if exists ${name} with (force)`);
      await client.end();
    },
  };
}

/**
 * initdb and the migrations take seconds on PGlite; a tarball of a migrated cluster, cached per
 * migration set, takes a fraction of that to load.
 */
async function pgliteTemplate(): Promise<Blob> {
  const migrations = await readMigrations();
  const hash = createHash("sha256")
    .update(migrations.map((m) => m.checksum).join(","))
    .digest("hex")
    .slice(0, 16);
  const file = path.join(tmpdir(), `emisor-pglite-template-${hash}.tar`);
  try {
    return new Blob([readFileSync(file)]);
  } catch {
    const database = await openDatabase({});
    await migrate(database);
    const dump = await database.dump();
    await database.close();
    const partial = `${file}.${process.pid}.tmp`;
    writeFileSync(partial, Buffer.from(await dump.arrayBuffer()));
    renameSync(partial, file);
    return dump;
  }
}
