import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import {
  Kysely,
  PostgresDialect,
  type PostgresPool,
  type PostgresPoolClient,
  sql,
  type Transaction,
} from "kysely";
import pg from "pg";
import { limits } from "../limits.ts";
import { acquireDirLock } from "./dir-lock.ts";
import { isDatabaseUnavailable, markOutcomeUnknown } from "./failures.ts";
import { FairGate } from "./fair-gate.ts";
import { failoverClient, type HostPort, HostSet, mayComeUp, parseDatabaseUrl } from "./hosts.ts";
import { PGliteDialect } from "./pglite-dialect.ts";
import type { Schema } from "./schema.ts";
import { currentTenant } from "./tenant-scope.ts";

export type Db = Kysely<Schema>;
export type Tx = Transaction<Schema>;
/** Either the root handle or an open transaction: repositories accept both. */
export type Queryable = Db | Tx;

export type Engine = "pglite" | "postgres";

export interface Database {
  readonly engine: Engine;
  readonly db: Db;
  /** Runs a multi-statement SQL script inside the given transaction (migrations). */
  execScript(tx: Tx, script: string): Promise<void>;
  /** True when a trivial query answers within the timeout. */
  ping(timeoutMs: number): Promise<boolean>;
  /** PGlite only: the data directory as a tarball, used to clone migrated test databases. */
  dump(): Promise<Blob>;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  databaseUrl?: string | undefined;
  /** PGlite data directory; `undefined` keeps the database in memory. */
  dataDir?: string | undefined;
  /** PGlite: start from this tarball instead of an empty cluster. */
  loadDataDir?: Blob | undefined;
  poolSize?: number;
  /** Called with errors of PostgreSQL connections (a restarted server), idle or checked out. */
  onPoolError?: (error: Error) => void;
  /** PostgreSQL: a statement unanswered this long has its connection dropped (503, not a hang). */
  queryTimeoutMs?: number;
  /** PostgreSQL: how many distinct statement texts are prepared; 0 prepares none. */
  preparedStatements?: number;
  /**
   * Embedded: told what the data directory's lock does that an operator should know (a start
   * waiting up to a minute for a lock of another PID namespace, a lock lost while open).
   */
  warn?: (message: string) => void;
}

// int8 -> bigint everywhere: money is bigint centavos from the column to the edge.
const int8Oid = 20;
const numericOid = 1700;
const parseBigint = (value: string) => BigInt(value);

export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  return options.databaseUrl ? openPostgres(options.databaseUrl, options) : openPGlite(options);
}

async function openPGlite(options: DatabaseOptions): Promise<Database> {
  if (options.dataDir) mkdirSync(options.dataDir, { recursive: true });
  // PGlite has no cross-process locking: two processes on one directory would corrupt it.
  const releaseLock = options.dataDir
    ? await acquireDirLock(options.dataDir, { warn: options.warn })
    : () => {};
  let pglite: PGlite;
  try {
    const initialized = options.dataDir ? prepareDataDir(options.dataDir) : () => {};
    // One options object: `new PGlite(undefined, options)` silently drops the options (and with
    // them the int8 parser, turning money into floats).
    pglite = new PGlite({
      ...(options.dataDir ? { dataDir: options.dataDir } : {}),
      ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}),
      parsers: { [int8Oid]: parseBigint, [numericOid]: (value: string) => value },
      postgresqlconf: [`shared_buffers = ${limits.pgliteSharedBuffers}`],
    });
    await pglite.waitReady;
    initialized();
  } catch (error) {
    // A start that failed holds nothing: a retry in this process (which a held lock refuses) or
    // another process may open the directory.
    releaseLock();
    throw error;
  }
  const db = new Kysely<Schema>({ dialect: new PGliteDialect(pglite, limits.dbAcquireTimeoutMs) });
  return {
    engine: "pglite",
    db,
    // The transaction holds PGlite's only connection, so the raw handle runs inside it.
    execScript: async (_tx, script) => {
      await pglite.exec(script);
    },
    ping: async (timeoutMs) => withTimeout(sql`select 1`.execute(db), timeoutMs),
    dump: () => pglite.dumpDataDir("none"),
    close: async () => {
      await db.destroy();
      releaseLock();
    },
  };
}

/**
 * A process killed at any instant must leave an embedded data directory that the next start
 * opens. Two things PGlite writes are not atomic, and each could stop every later start:
 * - `postmaster.pid`, created empty at every start, then filled: left empty, the next start fails
 *   ("PGlite failed to initialize properly"). It locks nothing (every PGlite process writes the
 *   same pid and takes over one it finds); the directory's lock is Emisor's own (dir-lock.ts),
 *   held by the caller, so the file is removed.
 * - the first start copies a new cluster into the directory file by file, `PG_VERSION` near the
 *   end and configuration files after it, and a start that finds `PG_VERSION` opens what is
 *   there. A marker written before the copy and removed once the database is open tells the next
 *   start that what it finds is an interrupted first start, which holds no data yet: PostgreSQL's
 *   files are removed and the cluster is created again.
 * Returns what marks the directory's creation done (nothing when it already was).
 */
function prepareDataDir(dir: string): () => void {
  rmSync(path.join(dir, "postmaster.pid"), { force: true });
  const marker = path.join(dir, initMarker);
  if (existsSync(marker)) {
    for (const entry of readdirSync(dir))
      if (clusterEntry.test(entry)) rmSync(path.join(dir, entry), { recursive: true, force: true });
  } else if (existsSync(path.join(dir, "PG_VERSION"))) {
    return () => {};
  }
  writeFileSync(marker, "");
  return () => rmSync(marker, { force: true });
}

const initMarker = "emisor-init.incomplete";
/** What PostgreSQL keeps at the top of a data directory (not Emisor's lock or master key). */
const clusterEntry = /^(PG_VERSION|base|global|pg_[\w.]+|postgresql(\.auto)?\.conf|postmaster\.(pid|opts))$/;

async function openPostgres(databaseUrl: string, options: DatabaseOptions): Promise<Database> {
  const poolSize = options.poolSize ?? 20;
  const parsed = parseDatabaseUrl(databaseUrl);
  const hosts = parsed && new HostSet(parsed, limits.dbHostProbeTimeoutMs);
  const pool = new pg.Pool({
    // Several hosts: the URL of the first stands for them all (user, database, options), and each
    // connection goes to the host the set picks.
    connectionString: parsed && hosts ? parsed.urlFor(parsed.hosts[0] as HostPort) : databaseUrl,
    ...(hosts ? { Client: failoverClient(hosts) } : {}),
    max: poolSize,
    connectionTimeoutMillis: limits.dbAcquireTimeoutMs,
    idleTimeoutMillis: 30_000,
    statement_timeout: limits.dbStatementTimeoutMs,
    keepAlive: true,
    types: {
      getTypeParser: ((oid: number, format?: "text" | "binary") => {
        if (oid === int8Oid) return parseBigint;
        if (oid === numericOid) return (value: string) => value;
        return pg.types.getTypeParser(oid, format);
      }) as typeof pg.types.getTypeParser,
    },
  });
  pool.on("error", (error) => options.onPoolError?.(error));
  // pg-pool listens for errors only while a connection is idle. A connection lost while checked
  // out between two statements of a transaction (a server restart) would emit an unhandled
  // 'error' and kill the process; with this listener its next statement fails instead (503) and
  // the pool discards it on release.
  pool.on("connect", (client) => {
    client.on("error", (error) => options.onPoolError?.(error));
  });
  // After the listener above: the connection made here is pooled and used like any other.
  await checkConnection(pool, hosts ? limits.dbStartWaitMs : 0, options.warn);
  const queryTimeoutMs = options.queryTimeoutMs ?? limits.dbQueryTimeoutMs;
  const db = new Kysely<Schema>({
    dialect: new PostgresDialect({
      pool: withQueryDeadline(
        pool,
        queryTimeoutMs,
        new StatementNames(options.preparedStatements ?? limits.dbPreparedStatementsMax),
        // The pool's own queue is one line for everyone; the gate in front of it takes turns.
        new FairGate(poolSize, limits.dbAcquireTimeoutMs, Math.round(poolSize * limits.dbTenantShareOfPool)),
        hosts !== undefined,
      ),
    }),
  });
  return {
    engine: "postgres",
    db,
    // With no parameters node-postgres uses the simple protocol, which allows several statements.
    execScript: async (tx, script) => {
      await sql.raw(script).execute(tx);
    },
    ping: async (timeoutMs) => withTimeout(sql`select 1`.execute(db), timeoutMs),
    dump: () => Promise.reject(new Error("dump is only available on PGlite")),
    close: () => db.destroy(),
  };
}

/**
 * One connection at open, so a server that cannot be reached or refuses the login stops the start
 * with a message naming DATABASE_URL; pg's own ("no PostgreSQL user name specified in startup
 * packet", "getaddrinfo ENOTFOUND db") name nothing Emisor reads. pg's messages never carry the
 * password. A multi-host URL names a failover pair: a start during a failover (no primary yet, a
 * promoted standby still starting) waits up to `waitMs` for one, as the running processes do;
 * a refused login or a missing database ends the start at once, as with one host.
 */
async function checkConnection(
  pool: pg.Pool,
  waitMs: number,
  warn?: (message: string) => void,
): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (let attempt = 1; ; attempt += 1) {
    try {
      (await pool.connect()).release();
      return;
    } catch (error) {
      if (!mayComeUp(error) || Date.now() >= deadline) {
        await pool.end().catch(() => {});
        throw new Error(`could not connect to the PostgreSQL server of DATABASE_URL: ${describe(error)}`);
      }
      if (attempt === 1)
        warn?.(`waiting up to ${waitMs / 1000} s for a PostgreSQL host of DATABASE_URL: ${describe(error)}`);
      await new Promise((resolve) => setTimeout(resolve, startRetryMs));
    }
  }
}

const startRetryMs = 500;

/** An error's message; a failed connection to a name with several addresses has its own empty. */
function describe(error: unknown): string {
  if (error instanceof AggregateError && error.message === "")
    return error.errors.map(describe).join("; ") || String((error as NodeJS.ErrnoException).code);
  return error instanceof Error ? error.message : String(error);
}

/**
 * Names for prepared statements. Planning a statement costs PostgreSQL more than running it on a
 * hot row (several times over for a cardholder lookup), and Kysely builds the same text for the same code path with the values as
 * parameters. So every data statement with parameters gets a name, and node-postgres parses it
 * once per connection and reuses it (PostgreSQL switches to a generic plan when that costs no
 * more than the custom ones). Names are never reused for another text. Texts are bounded by the
 * code paths; past `max` of them (a runaway of generated texts) the rest run unnamed. Long texts
 * run unnamed too: those are multi-row inserts whose text changes with the row count (minting up
 * to 10,000 cards), and keeping each one per connection would cost memory for no reuse.
 */
/**
 * The longest statement text prepared. The longest hot one, an authorization batch's write, is
 * ~9,300: run unnamed, PostgreSQL planned it at every batch, for as long as it took to run it.
 */
const preparedTextLengthMax = 16_384;

export class StatementNames {
  readonly #names = new Map<string, string>();
  readonly #max: number;

  constructor(max: number) {
    this.#max = max;
  }

  of(text: string, values: ReadonlyArray<unknown>): string | undefined {
    const known = this.#names.get(text);
    if (known !== undefined) return known;
    // No parameters: a script or transaction control, possibly several statements (simple protocol).
    if (
      values.length === 0 ||
      text.length > preparedTextLengthMax ||
      this.#names.size >= this.#max ||
      !/^\s*(select|insert|update|delete|with)\b/i.test(text)
    )
      return undefined;
    const name = `emisor_${this.#names.size + 1}`;
    this.#names.set(text, name);
    return name;
  }
}

/** What pg keeps of a connection's socket: destroying it fails every statement on it at once. */
interface ClientWithSocket {
  connection?: { stream?: { destroy(): void } };
}

/**
 * The pool as Kysely sees it, with a deadline on every statement. A server that stopped answering
 * without closing the socket (a frozen host, a network partition) would otherwise hold the request
 * until TCP gives up, minutes later. pg's own query_timeout leaves the connection busy with the
 * unanswered statement and returns it to the pool; destroying the socket instead errors the
 * statement ("Connection terminated unexpectedly", mapped to 503) and the pool discards it.
 */
function withQueryDeadline(
  pool: pg.Pool,
  timeoutMs: number,
  names: StatementNames,
  gate: FairGate,
  severalHosts: boolean,
): PostgresPool {
  return {
    connect: async () => {
      const tenant = currentTenant();
      await gate.acquire(tenant);
      let client: pg.PoolClient;
      try {
        // A failed connection to one of several hosts sends the next to another (a failover):
        // tried once more at once, so the request is not refused while a primary answers.
        client = await pool.connect().catch((error: unknown) => {
          if (!severalHosts) throw error;
          return pool.connect();
        });
      } catch (error) {
        gate.release(tenant);
        throw error;
      }
      const outcome = new OutcomeTracker();
      const query = (text: string, values: ReadonlyArray<unknown>) => {
        const timer = setTimeout(() => (client as ClientWithSocket).connection?.stream?.destroy(), timeoutMs);
        const name = names.of(text, values);
        const config = name
          ? { name, text, values: values as unknown[] }
          : { text, values: values as unknown[] };
        const sent = outcome.sending(text);
        return client
          .query(config)
          .catch((error: unknown) => {
            outcome.failed(sent, error);
            throw error;
          })
          .finally(() => clearTimeout(timer));
      };
      // Only the (text, values) form: Kysely uses the cursor form for streams, which need a
      // cursor class configured on the dialect, and none is.
      const release = () => {
        client.release();
        gate.release(tenant);
      };
      return { query, release } as unknown as PostgresPoolClient;
    },
    end: () => pool.end(),
  };
}

type StatementKind = "begin" | "commit" | "rollback" | "read" | "write";

function kindOf(text: string): StatementKind {
  const word = /^\s*([a-z]+)/i.exec(text)?.[1]?.toLowerCase();
  if (word === "begin" || word === "start") return "begin";
  if (word === "commit" || word === "end") return "commit";
  if (word === "rollback" || word === "abort") return "rollback";
  return word === "select" ? "read" : "write";
}

/**
 * Follows one connection's transaction state to tell, when the connection dies under a
 * statement, whether the server may have applied work whose answer was lost: a COMMIT or a write
 * outside a transaction. Such failures (and the ROLLBACK that follows on the dead connection) are
 * marked so the client is told the outcome is unknown rather than that nothing ran.
 */
class OutcomeTracker {
  #inTransaction = false;
  #unknown = false;

  sending(text: string): StatementKind {
    const kind = kindOf(text);
    if (kind === "begin") this.#inTransaction = true;
    else if (kind === "commit" || kind === "rollback") this.#inTransaction = false;
    return kind;
  }

  failed(kind: StatementKind, error: unknown): void {
    if (!isDatabaseUnavailable(error)) return;
    if (kind === "commit" || (kind === "write" && !this.#inTransaction)) this.#unknown = true;
    if (this.#unknown) markOutcomeUnknown(error);
  }
}

async function withTimeout(work: Promise<unknown>, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([work.then(() => true), timeout]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
