import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";

const run = promisify(execFile);

/** PostgreSQL for the bench: throwaway databases, SQL, and pgbench as the machine's ceiling. */
export class Postgres {
  readonly #base: URL;

  constructor(baseUrl: string) {
    this.#base = new URL(baseUrl);
  }

  urlOf(database: string): string {
    const url = new URL(this.#base.toString());
    url.pathname = `/${database}`;
    return url.toString();
  }

  /**
   * Runs one statement on a connection of its own. `bulk` skips foreign-key checks (the session
   * replicates, as pg_restore does): for seeding rows valid by construction, millions at a time.
   * Setting that needs a superuser; as anyone else the rows are seeded with their checks, slower.
   */
  async sql<T = Record<string, unknown>>(
    database: string,
    text: string,
    values: unknown[] = [],
    options: { bulk?: boolean } = {},
  ): Promise<T[]> {
    const client = new pg.Client({ connectionString: this.urlOf(database) });
    // A connection lost between statements (the bank test restarts PostgreSQL on purpose) is
    // emitted as an 'error' event, which unheard would end the process; the pending or next call
    // rejects with it anyway, so the caller sees the failure.
    client.on("error", () => {});
    await client.connect();
    try {
      if (options.bulk) await client.query("set session_replication_role = replica").catch(() => {});
      return (await client.query(text, values)).rows as T[];
    } finally {
      await client.end();
    }
  }

  /** The pid of a long-lived process of this server (the checkpointer: its parent is the postmaster). */
  async serverProcessPid(): Promise<number> {
    const [row] = await this.sql<{ pid: number }>(
      "postgres",
      "select pid from pg_stat_activity where backend_type = 'checkpointer'",
    );
    return Number(row?.pid);
  }

  /** Empties pg_stat_statements (loaded by `shared_preload_libraries`, created in `postgres`). */
  async resetStatements(): Promise<void> {
    await this.sql("postgres", "select pg_stat_statements_reset()");
  }

  /**
   * The statements that took the most of PostgreSQL's time since the reset, per request, with the
   * pages each read from outside shared buffers (a working set outgrowing them shows there first).
   */
  /** Planning is counted only with `pg_stat_statements.track_planning` on. */
  async describeStatements(requests: number, limit = 25): Promise<string> {
    const rows = await this.sql<{
      calls: string;
      ms: string;
      plan: string;
      read: string;
      hit: string;
      query: string;
    }>(
      "postgres",
      `select calls::text, round(total_exec_time::numeric, 1)::text as ms,
         round(total_plan_time::numeric, 1)::text as plan,
         shared_blks_read::text as read, shared_blks_hit::text as hit,
         regexp_replace(left(query, 140), '\\s+', ' ', 'g') as query
       from pg_stat_statements order by total_exec_time desc limit ${limit}`,
    );
    const per = (n: string, scale = 1) => ((Number(n) * scale) / Math.max(1, requests)).toFixed(1);
    const lines = rows.map(
      (r) =>
        `  ${per(r.ms, 1000).padStart(7)} us/req (planning ${per(r.plan, 1000)}) ${r.calls.padStart(8)} calls ${per(r.hit).padStart(6)} hit ${per(r.read).padStart(6)} read/req  ${r.query}`,
    );
    return `statements by total time:\n${lines.join("\n")}`;
  }

  async create(database: string): Promise<void> {
    await this.sql("postgres", `drop database if exists ${database} with (force)`);
    await this.sql("postgres", `create database ${database}`);
  }

  async drop(database: string): Promise<void> {
    await this.sql("postgres", `drop database if exists ${database} with (force)`);
  }

  #connectionArgs(database: string): string[] {
    const args = [
      "-h",
      this.#base.hostname || "127.0.0.1",
      "-p",
      this.#base.port || "5432",
      "-U",
      decodeURIComponent(this.#base.username || "postgres"),
    ];
    return [...args, database];
  }

  async pgbench(database: string, args: string[], timeoutMs: number): Promise<number> {
    const { stdout } = await run("pgbench", [...args, ...this.#connectionArgs(database)], {
      timeout: timeoutMs,
      maxBuffer: 16 * 1024 * 1024,
      env: { ...process.env, PGPASSWORD: decodeURIComponent(this.#base.password) },
    });
    const tps =
      /tps = ([0-9.]+) \((?:without initial connection time|excluding connections establishing)\)/.exec(
        stdout,
      );
    if (!tps?.[1]) throw new Error(`pgbench printed no tps:\n${stdout}`);
    return Math.round(Number(tps[1]));
  }
}

/** pgbench's own simple-update workload (-N) at scale `scale`: the machine's reference write rate. */
export async function pgbenchSimpleUpdate(
  pgs: Postgres,
  database: string,
  scale: number,
  seconds: number,
): Promise<number> {
  await pgs.create(database);
  await run("pgbench", ["-i", "-q", "-s", String(scale), ...connection(pgs, database)], { timeout: 600_000 });
  return pgs.pgbench(
    database,
    ["-N", "-c", "16", "-j", "2", "-T", String(seconds), "-n"],
    seconds * 1000 + 120_000,
  );
}

function connection(pgs: Postgres, database: string): string[] {
  const url = new URL(pgs.urlOf(database));
  return [
    "-h",
    url.hostname || "127.0.0.1",
    "-p",
    url.port || "5432",
    "-U",
    decodeURIComponent(url.username || "postgres"),
    database,
  ];
}

/**
 * One payment's row writes as ONE statement: the conditional debit of the payer row, the credit of
 * a card row, the entry and its two postings. `payers` = 1 is the hot account; 10,000 spreads it.
 */
export async function pgbenchPaymentStatement(
  pgs: Postgres,
  database: string,
  payers: number,
  clients: number,
  seconds: number,
): Promise<number> {
  await pgs.sql(database, "drop table if exists bench_accounts, bench_entries, bench_postings");
  await pgs.sql(
    database,
    "create table bench_accounts (id integer primary key, balance bigint not null check (balance >= 0))",
  );
  await pgs.sql(
    database,
    "insert into bench_accounts select g, 1000000000000 from generate_series(1, 20000) g",
  );
  await pgs.sql(
    database,
    "create table bench_entries (id bigint generated always as identity primary key, kind text not null, created_at timestamptz not null default now())",
  );
  await pgs.sql(
    database,
    "create table bench_postings (id bigint generated always as identity primary key, entry_id bigint not null, account_id integer not null, amount bigint not null)",
  );
  await pgs.sql(database, "create index on bench_postings (account_id, id)");
  await pgs.sql(database, "vacuum analyze bench_accounts");
  const script = path.join(tmpdir(), `emisor-payment-${payers}.sql`);
  writeFileSync(
    script,
    `\\set payer random(1, ${payers})
\\set card random(10001, 20000)
with d as (update bench_accounts set balance = balance - 1 where id = :payer and balance >= 1 returning id),
     c as (update bench_accounts set balance = balance + 1 where id = :card and exists (select 1 from d) returning id),
     e as (insert into bench_entries (kind) select 'PAYMENT' from c returning id)
insert into bench_postings (entry_id, account_id, amount) select e.id, v.a, v.m from e, (values (:payer, -1), (:card, 1)) v(a, m);
`,
  );
  return pgs.pgbench(
    database,
    ["-n", "-c", String(clients), "-j", "2", "-T", String(seconds), "-f", script],
    seconds * 1000 + 120_000,
  );
}
