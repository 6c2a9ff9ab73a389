import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { freePort } from "./cluster.ts";

const binary = process.env.PGBOUNCER_BIN || "/usr/sbin/pgbouncer";

/**
 * A private PgBouncer on a free port in front of the bank test's cluster, in transaction mode:
 * each transaction (or statement outside one) may run on another server connection, so nothing
 * of a session survives between them. That is why Emisor runs behind it with
 * EMISOR_DB_PREPARED_STATEMENTS=0 (a statement prepared on one server connection is unknown on the
 * next) and why pg's startup parameters PgBouncer does not pass on are ignored: the statement
 * timeout is set on the database instead (`alter database … set statement_timeout`).
 * PgBouncer refuses to run as root, so as root it runs as the `postgres` OS user.
 */
export class PrivateBouncer {
  readonly port: number;
  readonly #dir: string;
  readonly #child: ChildProcess;

  private constructor(dir: string, port: number, child: ChildProcess) {
    this.#dir = dir;
    this.port = port;
    this.#child = child;
  }

  static available(): boolean {
    return existsSync(binary);
  }

  static async start(server: { port: number }, poolSize: number): Promise<PrivateBouncer> {
    const dir = mkdtempSync(path.join(tmpdir(), "emisor-chaos-bouncer-"));
    const port = await freePort();
    const config = path.join(dir, "pgbouncer.ini");
    writeFileSync(path.join(dir, "users.txt"), '"postgres" ""\n');
    writeFileSync(
      config,
      [
        "[databases]",
        `* = host=127.0.0.1 port=${server.port}`,
        "[pgbouncer]",
        "listen_addr = 127.0.0.1",
        `listen_port = ${port}`,
        `unix_socket_dir = ${dir}`,
        "auth_type = trust",
        `auth_file = ${path.join(dir, "users.txt")}`,
        "pool_mode = transaction",
        "max_client_conn = 1000",
        `default_pool_size = ${poolSize}`,
        "ignore_startup_parameters = extra_float_digits,statement_timeout,options",
        // A server connection broken by a PostgreSQL restart is dropped, and new ones retried soon.
        "server_login_retry = 1",
        `logfile = ${path.join(dir, "pgbouncer.log")}`,
        "",
      ].join("\n"),
    );
    const asRoot = process.getuid?.() === 0;
    if (asRoot) {
      const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
      const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
      for (const file of [dir, config, path.join(dir, "users.txt")]) chownSync(file, uid, gid);
    }
    const child = asRoot
      ? spawn("runuser", ["-u", "postgres", "--", binary, config], { stdio: "ignore" })
      : spawn(binary, [config], { stdio: "ignore" });
    const bouncer = new PrivateBouncer(dir, port, child);
    await bouncer.#listening(10_000);
    return bouncer;
  }

  async #listening(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.#child.exitCode !== null) throw new Error(`pgbouncer exited with ${this.#child.exitCode}`);
      const up = await new Promise<boolean>((resolve) => {
        const socket = net.connect(this.port, "127.0.0.1", () => {
          socket.destroy();
          resolve(true);
        });
        socket.once("error", () => resolve(false));
      });
      if (up) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`pgbouncer not listening on ${this.port} after ${timeoutMs} ms`);
  }

  /** Stops PgBouncer and deletes its files; safe to call twice. */
  async destroy(): Promise<void> {
    if (this.#child.exitCode === null && this.#child.signalCode === null) {
      const exited = new Promise((resolve) => this.#child.once("exit", resolve));
      // runuser passes SIGTERM on to pgbouncer.
      this.#child.kill("SIGTERM");
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5000))]);
      this.#child.kill("SIGKILL");
    }
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
