import { Postgres } from "../../bench/lib/pg.ts";
import { PrivateCluster } from "./cluster.ts";
import { PrivateBouncer } from "./pgbouncer.ts";

/**
 * The PostgreSQL side of a bank test run, in one of three shapes:
 * - `single`: one private cluster, Emisor connected to it directly (the original form);
 * - `bouncer`: one cluster behind a private PgBouncer in transaction mode (the three-process form);
 * - `failover`: a primary and a synchronous streaming standby; Emisor's DATABASE_URL names both
 *   with target_session_attrs=read-write, and `failover()` loses the primary and promotes the
 *   standby under load.
 * The books (checks.ts) are always read on the current primary directly, never through PgBouncer.
 */
export type Shape = "single" | "bouncer" | "failover";

const standbyName = "standby1";

export class Topology {
  readonly shape: Shape;
  readonly database: string;
  #primary: PrivateCluster;
  #lost: PrivateCluster | undefined;
  readonly #standby: PrivateCluster | undefined;
  readonly #bouncer: PrivateBouncer | undefined;
  #books: Postgres;
  failovers = 0;

  private constructor(
    shape: Shape,
    database: string,
    primary: PrivateCluster,
    standby?: PrivateCluster,
    bouncer?: PrivateBouncer,
  ) {
    this.shape = shape;
    this.database = database;
    this.#primary = primary;
    this.#standby = standby;
    this.#bouncer = bouncer;
    this.#books = new Postgres(primary.url);
  }

  static async create(shape: Shape, database: string, bouncerPoolSize = 40): Promise<Topology> {
    const primary = await PrivateCluster.create(
      shape === "failover" ? { synchronousStandby: standbyName } : {},
    );
    let standby: PrivateCluster | undefined;
    try {
      // The standby first: the primary's commits (create database too) wait for it.
      standby = shape === "failover" ? await primary.createStandby(standbyName) : undefined;
      await new Postgres(primary.url).sql("postgres", `create database ${database}`);
      // PgBouncer does not pass pg's statement_timeout on at connection start: set on the database.
      if (shape === "bouncer")
        await new Postgres(primary.url).sql(
          "postgres",
          `alter database ${database} set statement_timeout = '15s'`,
        );
      const bouncer = shape === "bouncer" ? await PrivateBouncer.start(primary, bouncerPoolSize) : undefined;
      return new Topology(shape, database, primary, standby, bouncer);
    } catch (error) {
      await primary.destroy();
      await standby?.destroy();
      throw error;
    }
  }

  /** SQL on the current primary, for the checks. */
  get books(): Postgres {
    return this.#books;
  }

  /** What Emisor's DATABASE_URL is in this shape, and the settings it needs there. */
  emisorEnv(): Record<string, string> {
    const url = (port: number) => `postgres://postgres@127.0.0.1:${port}/${this.database}`;
    if (this.#bouncer)
      // Transaction pooling: a statement prepared on one server connection is unknown on the next.
      return { DATABASE_URL: url(this.#bouncer.port), EMISOR_DB_PREPARED_STATEMENTS: "0" };
    if (this.#standby)
      return {
        DATABASE_URL: `postgres://postgres@127.0.0.1:${this.#primary.port},127.0.0.1:${this.#standby.port}/${this.database}?target_session_attrs=read-write`,
      };
    return { DATABASE_URL: url(this.#primary.port) };
  }

  /** A crash of the current primary and its start (recovery from WAL). */
  async restartPrimary(): Promise<void> {
    await this.#primary.restartImmediate();
  }

  get canFailOver(): boolean {
    return this.#standby !== undefined && this.failovers === 0;
  }

  /**
   * The primary's host is lost (an immediate stop, never started again) and the standby is
   * promoted, as an operator or a failover manager does. Every commit a client was answered for
   * is on the standby: the primary waited for the standby to have it on disk. Only once the
   * standby has caught up, as a failover manager promotes only a standby in sync: a primary just
   * restarted from a crash shows the transactions it committed before it that the standby never
   * confirmed (a retry is answered from them), and the standby gets them only once it reconnects.
   */
  async failover(): Promise<number> {
    const standby = this.#standby;
    if (!standby) throw new Error("no standby to fail over to");
    await standby.caughtUp(this.#primary);
    const started = Date.now();
    await this.#primary.crash();
    await standby.promote();
    this.#lost = this.#primary;
    this.#primary = standby;
    this.#books = new Postgres(standby.url);
    this.failovers += 1;
    return Date.now() - started;
  }

  async destroy(): Promise<void> {
    await this.#bouncer?.destroy();
    await Promise.all(
      [this.#primary, this.#standby, this.#lost].map((cluster) => cluster?.destroy().catch(() => {})),
    );
  }
}
