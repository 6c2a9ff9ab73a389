import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, type WriteStream } from "node:fs";

/**
 * The production build of Emisor as a separate process on a fixed port (clients keep one URL
 * across restarts), which the bank test kills with SIGKILL and starts again. A start fails while
 * the database is away (migrations need it), so `start` tries until the banner appears.
 * An exit nobody asked for is counted: the service must never die by itself.
 */
export class EmisorProcess {
  unexpectedExits = 0;
  readonly #env: Record<string, string>;
  readonly #log: WriteStream;
  #child: ChildProcess | undefined;
  #expectingExit = false;
  #banner = "";

  constructor(env: Record<string, string>, logFile: string) {
    this.#env = env;
    this.#log = createWriteStream(logFile, { flags: "a" });
  }

  /** What the last start printed up to its login line (the first start's shows the sandbox tenant). */
  get banner(): string {
    return this.#banner;
  }

  get running(): boolean {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /** Starts the process, retrying (the database may be restarting) until ready or `timeoutMs`. */
  async start(timeoutMs = 120_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        await this.#startOnce(Math.max(1000, deadline - Date.now()));
        return;
      } catch (error) {
        if (Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
    }
  }

  #startOnce(timeoutMs: number): Promise<void> {
    const child = spawn(process.execPath, ["dist/src/main.js"], {
      env: { ...process.env, ...this.#env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.#child = child;
    this.#expectingExit = false;
    child.stderr?.pipe(this.#log, { end: false });
    let output = "";
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error(`Emisor not ready in ${timeoutMs} ms:\n${output}`));
      }, timeoutMs);
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        if (/Log in:\n.*curl.*\n/.test(output)) {
          clearTimeout(timer);
          this.#banner = output;
          child.stdout?.off("data", onData);
          // pino writes the structured log to stdout.
          child.stdout?.pipe(this.#log, { end: false });
          child.on("exit", (code, signal) => {
            if (!this.#expectingExit) {
              this.unexpectedExits += 1;
              this.#log.write(`\n[chaos] Emisor exited by itself: code ${code} signal ${signal}\n`);
            }
          });
          resolve();
        }
      };
      child.stdout?.on("data", onData);
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`Emisor exited with ${code} while starting:\n${output}`));
      });
    });
  }

  /** SIGKILL: no drain, no cleanup, as a crashed host or an OOM kill. */
  async kill(): Promise<void> {
    await this.#stop("SIGKILL");
  }

  /** SIGTERM and the exit code (graceful shutdown). */
  async terminate(): Promise<number | null> {
    return this.#stop("SIGTERM");
  }

  async #stop(signal: NodeJS.Signals): Promise<number | null> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return child?.exitCode ?? null;
    this.#expectingExit = true;
    return new Promise((resolve) => {
      child.once("exit", (code) => resolve(code));
      child.kill(signal);
    });
  }

  close(): void {
    this.#log.end();
  }
}

/**
 * Several Emisor processes on one database, each on its own port, as a load balancer's pool: the
 * bank test's clients spread their attempts over `bases`, and a fault kills one process while the
 * others serve. The first starts alone (it migrates, and on a first start creates the sandbox
 * tenant, which two first starts at once could both create); the rest start together.
 */
export class EmisorFleet {
  readonly members: EmisorProcess[];
  readonly bases: string[];

  constructor(members: EmisorProcess[], bases: string[]) {
    this.members = members;
    this.bases = bases;
  }

  get banner(): string {
    return this.members[0]?.banner ?? "";
  }

  get unexpectedExits(): number {
    return this.members.reduce((sum, member) => sum + member.unexpectedExits, 0);
  }

  async start(): Promise<void> {
    const [first, ...rest] = this.members;
    await first?.start();
    await Promise.all(rest.map((member) => member.start()));
  }

  /** Starts again any member that is not running (after a fault). */
  async restartStopped(): Promise<void> {
    await Promise.all(this.members.filter((member) => !member.running).map((member) => member.start()));
  }

  pick(): EmisorProcess {
    const member = this.members[Math.floor(Math.random() * this.members.length)] ?? this.members[0];
    if (!member) throw new Error("an empty fleet");
    return member;
  }

  async kill(): Promise<void> {
    await Promise.all(this.members.map((member) => member.kill()));
  }

  /** SIGTERM to every member at once; the exit codes. */
  async terminate(): Promise<Array<number | null>> {
    return Promise.all(this.members.map((member) => member.terminate()));
  }

  close(): void {
    for (const member of this.members) member.close();
  }
}
