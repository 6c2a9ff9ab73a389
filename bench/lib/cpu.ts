import { readdirSync, readFileSync } from "node:fs";

/**
 * CPU seconds used so far by the service, by every PostgreSQL process of the machine (backends,
 * WAL writer, checkpointer) and by this process (the load generator), from /proc (Linux). CPU per
 * request moves far less than requests per second on a noisy machine, so A/B comparisons of a
 * change to the request path can use it.
 */
export interface CpuSnapshot {
  service: number;
  /** Per PostgreSQL process (backends come and go: a sum would drop what an ended one used). */
  postgres: Map<string, number>;
  loader: number;
}

const ticksPerSecond = 100;

function processSeconds(pid: number | string): number {
  try {
    // Fields after the command (which may hold spaces) start at state; utime and stime are 14 and 15.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
  } catch {
    return 0; // the process ended between listing and reading
  }
}

function parentOf(pid: number | string): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
}

let postmaster: number | undefined;

/**
 * Counts only the processes of the PostgreSQL server that `serverPid` (one of its processes
 * outside any session) belongs to: another server on the machine (another test run's) would add
 * its CPU otherwise. Without this, or where the process cannot be read, every server counts.
 */
export function countPostgresOf(serverPid: number): void {
  try {
    postmaster = parentOf(serverPid);
  } catch {
    postmaster = undefined;
  }
}

function postgresSeconds(): Map<string, number> {
  const seconds = new Map<string, number>();
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/comm`, "utf8").trim() !== "postgres") continue;
      if (postmaster === undefined || Number(pid) === postmaster || parentOf(pid) === postmaster)
        seconds.set(pid, processSeconds(pid));
    } catch {
      // gone already
    }
  }
  return seconds;
}

/**
 * CPU the PostgreSQL processes used between two snapshots: each live one's growth, all of a new
 * one's. A process that ended in between is not counted (its last reading is gone with it).
 */
function postgresUsed(before: Map<string, number>, after: Map<string, number>): number {
  let used = 0;
  for (const [pid, seconds] of after) used += Math.max(0, seconds - (before.get(pid) ?? 0));
  return used;
}

/** `servicePids`: one service process, or several whose CPU is summed (one service spread over them). */
export function cpuSnapshot(servicePids: number | number[]): CpuSnapshot {
  const own = process.cpuUsage();
  return {
    service: [servicePids].flat().reduce((total, pid) => total + processSeconds(pid), 0),
    postgres: postgresSeconds(),
    loader: (own.user + own.system) / 1e6,
  };
}

/** "service 112 us, PostgreSQL 98 us, load generator 41 us per request (0.61, 0.53, 0.22 cores)". */
export function describeCpu(
  before: CpuSnapshot,
  after: CpuSnapshot,
  requests: number,
  seconds: number,
): string {
  const parts = (["service", "postgres", "loader"] as const).map((k) => {
    const used = k === "postgres" ? postgresUsed(before.postgres, after.postgres) : after[k] - before[k];
    return { k, perRequest: requests > 0 ? (used / requests) * 1e6 : 0, cores: used / seconds };
  });
  const names = { service: "service", postgres: "PostgreSQL", loader: "load generator" };
  return `CPU per request: ${parts.map((p) => `${names[p.k]} ${Math.round(p.perRequest)} us`).join(", ")} (${parts.map((p) => p.cores.toFixed(2)).join(", ")} cores)`;
}

/**
 * CPU seconds of a process's main thread (the event loop) and of all its other threads: V8's
 * helpers, which do most of the collector's work and compile optimized code, and libuv's pool
 * (scrypt, file system). Node 20 names them all "node", so they are told apart from the main
 * thread only.
 */
export function threadSeconds(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return byName;
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      const name = tid === String(pid) ? "main" : "others";
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const seconds = (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
      byName.set(name, (byName.get(name) ?? 0) + seconds);
    } catch {
      // the thread ended between listing and reading
    }
  }
  return byName;
}

/** "main 210 us, others 60 us" per request between two readings of threadSeconds. */
export function describeThreads(
  before: Map<string, number>,
  after: Map<string, number>,
  requests: number,
): string {
  return [...after]
    .map(
      ([name, seconds]) =>
        [name, ((seconds - (before.get(name) ?? 0)) * 1e6) / Math.max(requests, 1)] as const,
    )
    .filter(([, us]) => us >= 1)
    .sort((a, b) => b[1] - a[1])
    .map(([name, us]) => `${name} ${us.toFixed(0)} us`)
    .join(", ");
}
