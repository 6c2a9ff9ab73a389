import type { PGlite } from "@electric-sql/pglite";
import {
  CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type QueryResult,
  type TransactionSettings,
} from "kysely";
import { FairGate } from "./fair-gate.ts";
import { currentTenant } from "./tenant-scope.ts";

/**
 * A Kysely dialect over PGlite. PGlite is one connection to a single-threaded Postgres, so the
 * driver hands that connection to one user at a time: a transaction holds it from BEGIN to
 * COMMIT and every other query waits its turn, tenants taking turns (fair-gate.ts). Code must therefore never run a query on
 * the root handle while it holds a transaction (it would wait for itself); on PostgreSQL the
 * same mistake would take a second connection and hide the bug, so tests run on both.
 */
export class PGliteDialect implements Dialect {
  readonly #pg: PGlite;
  readonly #acquireTimeoutMs: number;

  constructor(pg: PGlite, acquireTimeoutMs: number) {
    this.#pg = pg;
    this.#acquireTimeoutMs = acquireTimeoutMs;
  }

  createAdapter() {
    return new PostgresAdapter();
  }
  createDriver(): Driver {
    return new PGliteDriver(this.#pg, this.#acquireTimeoutMs);
  }
  createIntrospector(db: Kysely<unknown>) {
    return new PostgresIntrospector(db);
  }
  createQueryCompiler() {
    return new PostgresQueryCompiler();
  }
}

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

class PGliteConnection implements DatabaseConnection {
  readonly #pg: PGlite;
  constructor(pg: PGlite) {
    this.#pg = pg;
  }

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const result = await this.#pg.query<R>(query.sql, query.parameters as unknown[], { rowMode: "object" });
    // PGlite runs on this thread and settles its promise with microtasks only, so a transaction
    // would run start to finish without letting any other request advance: concurrent payments
    // could never join a batch, and every other request would wait for the whole transaction.
    // One event-loop turn per statement lets them make progress in between.
    await yieldToEventLoop();
    return result.affectedRows === undefined
      ? { rows: result.rows }
      : { rows: result.rows, numAffectedRows: BigInt(result.affectedRows) };
  }

  // biome-ignore lint/correctness/useYield: streaming is not supported on PGlite; Emisor never streams.
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error("streaming queries are not supported on PGlite");
  }
}

class PGliteDriver implements Driver {
  readonly #pg: PGlite;
  readonly #connection: PGliteConnection;
  readonly #gate: FairGate;
  /** The tenant whose turn holds the connection. */
  #holder = "";

  constructor(pg: PGlite, acquireTimeoutMs: number) {
    this.#pg = pg;
    this.#connection = new PGliteConnection(pg);
    this.#gate = new FairGate(1, acquireTimeoutMs);
  }

  async init() {
    await this.#pg.waitReady;
  }
  async acquireConnection() {
    const tenant = currentTenant();
    await this.#gate.acquire(tenant);
    this.#holder = tenant;
    return this.#connection;
  }
  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings) {
    const isolation = settings.isolationLevel ? ` isolation level ${settings.isolationLevel}` : "";
    await connection.executeQuery(CompiledQuery.raw(`begin${isolation}`));
  }
  async commitTransaction(connection: DatabaseConnection) {
    await connection.executeQuery(CompiledQuery.raw("commit"));
  }
  async rollbackTransaction(connection: DatabaseConnection) {
    await connection.executeQuery(CompiledQuery.raw("rollback"));
  }
  async releaseConnection() {
    this.#gate.release(this.#holder);
  }
  async destroy() {
    if (!this.#pg.closed) await this.#pg.close();
  }
}
