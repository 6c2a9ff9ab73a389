import { execFile } from "node:child_process";
import { chownSync, mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { Postgres } from "../../bench/lib/pg.ts";

const run = promisify(execFile);
const bin = process.env.PG_BIN || "/usr/lib/postgresql/15/bin";

/**
 * A private PostgreSQL cluster in a temporary directory on a free port, which the bank test may
 * restart in immediate mode (a crash: no checkpoint, recovery from WAL) as often as it likes.
 * The shared server other processes use is never touched. initdb and postgres refuse to run as
 * root, so as root the cluster belongs to the `postgres` OS user.
 */
export class PrivateCluster {
  readonly port: number;
  readonly #dir: string;
  readonly #asRoot: boolean;
  /** Extra server settings (a primary's synchronous standby). */
  #settings = "";

  private constructor(dir: string, port: number) {
    this.#dir = dir;
    this.port = port;
    this.#asRoot = process.getuid?.() === 0;
  }

  static async #empty(): Promise<PrivateCluster> {
    const dir = mkdtempSync(path.join(tmpdir(), "emisor-chaos-pg-"));
    const cluster = new PrivateCluster(dir, await freePort());
    if (cluster.#asRoot) chownSync(dir, ...(await postgresIds()));
    return cluster;
  }

  /**
   * A primary whose commits wait for the standby `synchronousStandby` (its application_name) to
   * have the commit on disk, so a commit a client saw survives the primary's loss.
   */
  static async create(options: { synchronousStandby?: string } = {}): Promise<PrivateCluster> {
    const cluster = await PrivateCluster.#empty();
    if (options.synchronousStandby)
      cluster.#settings = ` -c synchronous_standby_names=${options.synchronousStandby} -c synchronous_commit=on`;
    await cluster.#pg("initdb", [
      "-D",
      cluster.#data,
      "-A",
      "trust",
      "-U",
      "postgres",
      "--no-sync",
      "-E",
      "UTF8",
    ]);
    await cluster.#ctl(["start", "-l", cluster.#log, "-o", cluster.#options]);
    return cluster;
  }

  /**
   * A streaming standby of this cluster, copied with pg_basebackup and named `name` (the
   * application_name a primary's synchronous_standby_names lists). Hot: it answers reads.
   */
  async createStandby(name: string): Promise<PrivateCluster> {
    const standby = await PrivateCluster.#empty();
    await standby.#pg("pg_basebackup", [
      "-D",
      standby.#data,
      "-h",
      "127.0.0.1",
      "-p",
      String(this.port),
      "-U",
      "postgres",
      "-X",
      "stream",
      "-R",
      "--no-sync",
    ]);
    // The primary_conninfo -R wrote, with the name the primary waits for.
    await standby.#pg("sh", [
      "-c",
      `echo "primary_conninfo = 'host=127.0.0.1 port=${this.port} user=postgres application_name=${name}'" >> ${path.join(standby.#data, "postgresql.auto.conf")}`,
    ]);
    await standby.#ctl(["start", "-l", standby.#log, "-o", standby.#options]);
    return standby;
  }

  /**
   * Waits until this standby has replayed everything `primary` had written when called: a standby
   * streams asynchronously, so a database just created there may not exist here yet.
   */
  async caughtUp(primary: PrivateCluster, timeoutMs = 30_000): Promise<void> {
    const [written] = await new Postgres(primary.url).sql<{ lsn: string }>(
      "postgres",
      "select pg_current_wal_lsn()::text as lsn",
    );
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const [row] = await new Postgres(this.url).sql<{ done: boolean }>(
        "postgres",
        "select coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false) as done",
        [written?.lsn],
      );
      if (row?.done) return;
      if (Date.now() > deadline)
        throw new Error(`standby on port ${this.port} did not catch up in ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Ends recovery: the standby becomes a primary that takes writes. */
  async promote(): Promise<void> {
    await this.#ctl(["promote"]);
  }

  /** A crash with no start: the server is gone (its host lost). */
  async crash(): Promise<void> {
    await this.#ctl(["stop", "-m", "immediate"]);
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  get logFile(): string {
    return this.#log;
  }

  /** A crash and a start: in-flight transactions are lost, committed ones survive (WAL). */
  async restartImmediate(): Promise<void> {
    await this.#ctl(["restart", "-m", "immediate", "-l", this.#log, "-o", this.#options]);
  }

  /** Stops the cluster (immediate) and deletes its files; safe to call twice or after a failure. */
  async destroy(): Promise<void> {
    await this.#ctl(["stop", "-m", "immediate"]).catch(() => {});
    rmSync(this.#dir, { recursive: true, force: true });
  }

  get #data(): string {
    return path.join(this.#dir, "data");
  }

  get #log(): string {
    return path.join(this.#dir, "postgres.log");
  }

  get #options(): string {
    // fsync stays on: a restart in immediate mode must keep every committed transaction.
    return `-p ${this.port} -k ${this.#dir} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=on${this.#settings}`;
  }

  #ctl(args: string[]): Promise<unknown> {
    return this.#pg("pg_ctl", ["-D", this.#data, "-w", "-t", "60", ...args]);
  }

  async #pg(tool: string, args: string[]): Promise<void> {
    const command = tool === "sh" ? tool : path.join(bin, tool);
    if (this.#asRoot) await run("runuser", ["-u", "postgres", "--", command, ...args], { timeout: 120_000 });
    else await run(command, args, { timeout: 120_000 });
  }
}

async function postgresIds(): Promise<[number, number]> {
  const { stdout } = await run("id", ["-u", "postgres"]);
  const { stdout: group } = await run("id", ["-g", "postgres"]);
  return [Number(stdout.trim()), Number(group.trim())];
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
