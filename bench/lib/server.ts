import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createWriteStream, readFileSync, writeFileSync } from "node:fs";

/**
 * How production runs Emisor: `npm run serve` (package.json; docs/operations.md),
 * read from package.json so the bench measures exactly that command. Its environment keeps glibc's
 * malloc from hoarding scrypt's 16 MB blocks and its flag bounds V8's old generation (both
 * measured in bench/README.md). BENCH_NODE_FLAGS adds node flags, for experiments.
 */
export const productionRun = parseServeScript();

function parseServeScript(): { args: string[]; env: Record<string, string> } {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
    scripts: Record<string, string>;
  };
  const words = (pkg.scripts.serve ?? "").split(/\s+/).filter(Boolean);
  // `exec env`: the shell npm runs the script in is replaced, so a signal to npm reaches node.
  if (words[0] === "exec") words.shift();
  if (words[0] === "env") words.shift();
  const env: Record<string, string> = {};
  while (words[0]?.includes("=")) {
    const word = words.shift() ?? "";
    env[word.slice(0, word.indexOf("="))] = word.slice(word.indexOf("=") + 1);
  }
  if (words.shift() !== "node") throw new Error('package.json\'s "serve" script must run node');
  const extra = (process.env.BENCH_NODE_FLAGS ?? "").split(" ").filter(Boolean);
  return { args: [...extra, ...words], env };
}

/** The master key of every Emisor this bench process starts (seeding ciphers card numbers with it). */
export const benchMasterKey = randomBytes(32).toString("hex");

/** The secret the bench signs card network messages with, as a processor would. */
export const benchCardNetworkSecret = randomBytes(16).toString("hex");

/** Emisor's environment in the bench: loopback, any free port, warn logs, sandbox, plus `extra`. */
export function emisorEnv(extra: Record<string, string>): Record<string, string> {
  return {
    HOST: "127.0.0.1",
    PORT: "0",
    LOG_LEVEL: "warn",
    EMISOR_MASTER_KEY: benchMasterKey,
    EMISOR_SANDBOX: "true",
    EMISOR_WORKERS: "true",
    EMISOR_CARD_NETWORK_SECRET: benchCardNetworkSecret,
    ...extra,
  };
}

/** Emisor is ready when its banner, ending with the login line, is out; group 1 is its URL. */
const emisorReady = /listening on (\S+)[\s\S]*Log in:\n.*curl.*\n/;

/**
 * An Emisor (or ceiling) server as a separate process, as in production: its URL from the banner,
 * its peak resident memory per scenario (VmHWM, reset through /proc/<pid>/clear_refs), and the
 * event-loop delay and memory it reports on /metrics.
 */
const batchForms = ["at_once", "under_lock", "fell_back"] as const;
/** The service's payment batch counters (emisor_payment_batches_total and its payments), by form. */
export type BatchCounts = Record<(typeof batchForms)[number], { batches: number; payments: number }>;

/** The payment batches between two readings, by form, with the mean payments per batch. */
export function describeBatches(after: BatchCounts, before?: BatchCounts): string {
  const parts = batchForms.flatMap((form) => {
    const n = after[form].batches - (before?.[form].batches ?? 0);
    const payments = after[form].payments - (before?.[form].payments ?? 0);
    return n > 0 ? [`${form} ${n} (x${(payments / n).toFixed(1)})`] : [];
  });
  return parts.length > 0 ? `payment batches: ${parts.join(", ")}` : "";
}

export class ServerProcess {
  readonly url: string;
  /** What the process printed until it was ready (Emisor's banner, with first-start credentials). */
  readonly banner: string;
  readonly #child: ChildProcess;

  private constructor(child: ChildProcess, url: string, banner: string) {
    this.#child = child;
    this.url = url;
    this.banner = banner;
  }

  static start(
    command: string,
    args: string[],
    env: Record<string, string>,
    ready: RegExp,
  ): Promise<ServerProcess> {
    const child = spawn(command, args, {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`server not ready in 120 s:\n${output}`)), 120_000);
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        const match = ready.exec(output);
        if (match?.[1]) {
          clearTimeout(timer);
          child.stdout?.off("data", onData);
          if (process.env.BENCH_STDOUT) child.stdout?.pipe(createWriteStream(process.env.BENCH_STDOUT));
          else child.stdout?.resume();
          resolve(new ServerProcess(child, match[1], output));
        }
      };
      child.stdout?.on("data", onData);
      child.stderr?.on("data", (chunk: Buffer) => {
        if (process.env.BENCH_STDERR) process.stderr.write(chunk);
        output += chunk.toString();
      });
      child.on("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`server exited with ${code}:\n${output}`));
      });
    });
  }

  /** The production build of Emisor, run as production runs it, with `env` added. */
  static emisor(env: Record<string, string>, nodeFlags: string[] = []): Promise<ServerProcess> {
    return ServerProcess.start(
      process.execPath,
      [...nodeFlags, ...productionRun.args],
      { ...productionRun.env, ...env },
      emisorReady,
    );
  }

  get pid(): number {
    return this.#child.pid ?? 0;
  }

  /** Starts a new peak-memory window. */
  resetPeakRss(): void {
    try {
      writeFileSync(`/proc/${this.pid}/clear_refs`, "5");
    } catch {
      // Without clear_refs the peak covers the process's whole life: still an upper bound.
    }
  }

  /** Peak resident set size since the last reset, in MB. */
  peakRssMb(): number {
    const status = readFileSync(`/proc/${this.pid}/status`, "utf8");
    const kb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0);
    return Math.round(kb / 1024);
  }

  /**
   * One scrape of /metrics: the p99 event-loop delay since the previous scrape (prom-client resets
   * that histogram on every scrape, so every reading goes through here), and where the memory is
   * now: V8's heap (used/total), memory outside it that V8 knows of (Buffers) and the resident set.
   * The rest of the resident set is native: malloc arenas, thread stacks, code.
   */
  async metrics(): Promise<{ eventLoopP99Ms: number; memory: string; batches: BatchCounts }> {
    const text = await (await fetch(`${this.url}/metrics`)).text();
    const value = (name: string) => new RegExp(`^emisor_${name} (\\S+)$`, "m").exec(text)?.[1];
    const mb = (name: string) => {
      const bytes = value(name);
      return bytes === undefined ? "?" : String(Math.round(Number(bytes) / 1048576));
    };
    const lag = value("nodejs_eventloop_lag_p99_seconds");
    const counted = (name: string, form: string) =>
      Number(new RegExp(`^emisor_${name}\\{form="${form}"\\} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
    const batches = Object.fromEntries(
      batchForms.map((form) => [
        form,
        {
          batches: counted("payment_batches_total", form),
          payments: counted("payment_batch_payments_total", form),
        },
      ]),
    ) as BatchCounts;
    return {
      eventLoopP99Ms: lag === undefined ? Number.NaN : Number(lag) * 1000,
      batches,
      memory: `heap ${mb("nodejs_heap_size_used_bytes")}/${mb("nodejs_heap_size_total_bytes")} MB, external ${mb("nodejs_external_memory_bytes")} MB, RSS now ${mb("process_resident_memory_bytes")} MB`,
    };
  }

  async stop(): Promise<void> {
    if (this.#child.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      this.#child.once("exit", () => resolve());
      this.#child.kill("SIGTERM");
    });
  }
}
