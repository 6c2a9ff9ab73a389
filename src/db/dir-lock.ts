import { createHash, randomBytes } from "node:crypto";
import {
  closeSync,
  fstatSync,
  futimesSync,
  linkSync,
  openSync,
  readFileSync,
  readlinkSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { limits } from "../limits.ts";

/**
 * A lock file naming the process that owns an embedded data directory. A second process gets
 * a clear error instead of corrupting the database; a lock left by a dead process is taken over.
 *
 * The file holds `<pid> <start time> <boot id> <pid namespace>` (Linux; the start time is field
 * 22 of /proc/<pid>/stat, in clock ticks since boot; the namespace is the inode of
 * /proc/self/ns/pid). A reader in the owner's PID namespace under the same boot looks the owner
 * up: the lock is held while a process with that PID, started at that time, runs; a PID recycled
 * by an unrelated process holds nothing, and a lock naming this very process is held (a second
 * open in one process is refused). A namespace's inode is given again only once the namespace is
 * gone, its processes with it, so a reused one does not mislead: its owner is dead either way. Any other reader (another PID namespace, as two containers
 * sharing a volume, where PID 1 is everyone's; another boot, which is another host sharing the
 * filesystem or a reboot) cannot look the owner up, so the owner beats: while it holds the lock it
 * touches the file's mtime every `heartbeatMs`, and such a reader judges the lock held while the
 * mtime is younger than `leaseMs`. A start that finds such a lock waits, re-reading, until its
 * lease would run out: a beat meanwhile means the owner lives and the start is refused; none means
 * it died (a container restarted after a crash), and the lock is stale. A lock is also stale once
 * it has been seen unchanged for a whole lease, whatever its mtime says (another host's clock).
 * Locks of earlier releases are judged as those releases did: `<pid> <start time> <boot id>` by
 * the PID and start time under the same boot (stale under another), and `<pid>` (also what is
 * written without /proc) by a live PID other than this process's.
 *
 * A lock file appears whole: it is written under a name of its own and linked into place, which
 * fails if the lock exists. A stale one is removed only by the holder of its takeover guard, a
 * file named after the content judged stale and created the same way; the holder removes the lock
 * only if it still holds that content with the mtime judged. Of several processes taking over one
 * stale lock at once, one gets the guard; the others find it held and are refused, or find it
 * gone and then the new lock. Nothing else removes a lock (the owner, at close, only its own), and
 * no two processes write the same content (the namespace tells apart two PID 1s started in the
 * same tick), so what the guard's holder read again is what it removes. A guard left by a process
 * that died holding it is stale and taken over the same way. The owner touches the lock only
 * while it holds its own content; finding it otherwise, it stops and warns.
 */
export async function acquireDirLock(dir: string, options: DirLockOptions = {}): Promise<() => void> {
  const leaseMs = options.leaseMs ?? limits.dirLockLeaseMs;
  const heartbeatMs = options.heartbeatMs ?? limits.dirLockHeartbeatMs;
  const warn = options.warn ?? (() => {});
  const file = path.join(dir, "emisor.lock");
  if (heldHere.has(path.resolve(file))) throw refused(dir, { pid: process.pid, self: true }, leaseMs);
  const mine = ownContent();
  const judge = new Judge(leaseMs);
  // Set at the first lock judged by its heartbeat: all waiting ends within one lease.
  let deadline: number | undefined;
  for (;;) {
    const refusal = take(file, mine, 0, judge);
    if (refusal === undefined) break;
    const seen = refusal.leased;
    if (seen === undefined || (deadline !== undefined && Date.now() >= deadline))
      throw refused(dir, refusal, leaseMs);
    if (deadline === undefined) {
      deadline = Date.now() + leaseMs;
      warn(
        `the embedded database in ${dir} is locked by process ${refusal.pid} of another PID namespace or host, whose last heartbeat was ${ago(seen.mtimeMs)} ago: waiting up to ${Math.ceil((Math.min(deadline, judge.staleAt(seen)) - Date.now()) / 1000)} s for the next one before taking the lock over`,
      );
    }
    const until = Math.min(deadline, judge.staleAt(seen));
    const watched = await watch(seen, until, Math.max(10, Math.min(heartbeatMs / 2, 1_000)));
    if (watched !== undefined) throw refused(dir, { ...refusal, leased: watched, alive: true }, leaseMs);
  }
  const stopHeartbeat = beat(dir, file, mine, { heartbeatMs, leaseMs, warn });
  heldHere.add(path.resolve(file));
  return () => {
    stopHeartbeat();
    heldHere.delete(path.resolve(file));
    removeOwn(file, mine);
  };
}

export interface DirLockOptions {
  /** How long a heartbeat keeps the lock held for a reader that cannot look its owner up. */
  leaseMs?: number;
  /** How often the owner touches its lock. */
  heartbeatMs?: number;
  /** Told when a start waits for a lock's lease, and when the owner finds its lock gone. */
  warn?: (message: string) => void;
}

/** Lock files this process holds: a second open is refused even where the content cannot tell. */
const heldHere = new Set<string>();

/** Why a lock (or its takeover guard) is not ours to take. */
interface Refusal {
  pid: number;
  /** This process holds it. */
  self?: boolean;
  /** Judged by its heartbeat (another PID namespace or boot): what was read, to watch. */
  leased?: Sighting;
  /** Its heartbeat advanced while this start waited. */
  alive?: boolean;
}

/** A lock file's content and mtime as read at one moment. */
interface Sighting {
  file: string;
  content: string;
  mtimeMs: number;
}

function refused(dir: string, refusal: Refusal, leaseMs: number): Error {
  const prefix = `the embedded database in ${dir}`;
  if (refusal.self)
    return new Error(`${prefix} is already open in this process (${refusal.pid}); close it first`);
  const seen = refusal.leased;
  if (seen === undefined)
    return new Error(
      `${prefix} is in use by process ${refusal.pid}; stop it first, or use DATABASE_URL for several processes`,
    );
  const free = new Date(Math.max(seen.mtimeMs, Date.now()) + leaseMs).toISOString();
  return new Error(
    `${prefix} is in use by process ${refusal.pid} of another PID namespace or host (a container sharing the directory?), ${refusal.alive ? "alive: its heartbeat advanced while this start waited" : `whose last heartbeat was ${ago(seen.mtimeMs)} ago`}; stop it first, or use DATABASE_URL for several processes. If it is gone, the lock is free from ${free} (${leaseMs / 1000} s after its last heartbeat)`,
  );
}

const ago = (mtimeMs: number) => `${Math.max(0, Math.round((Date.now() - mtimeMs) / 100) / 10)} s`;

/** Guards within guards: each level needs a process to die inside the one before. */
const guardDepthMax = 4;

/**
 * Creates `file` holding `content`, taking over a stale one. Answers undefined when it did, or
 * why not: the process that holds the file (or is taking it over).
 */
function take(file: string, content: string, depth: number, judge: Judge): Refusal | undefined {
  if (depth > guardDepthMax)
    throw new Error(`could not lock ${path.dirname(file)}: too many takeover guards`);
  for (let attempt = 0; attempt < 8; attempt++) {
    if (createExclusive(file, content)) return undefined;
    const found = readSighting(file);
    if (found === undefined) continue;
    const refusal = judge.held(found);
    if (refusal !== undefined) return refusal;
    const guard = `${file}.takeover-${createHash("sha256").update(found.content).digest("hex").slice(0, 16)}`;
    const guardRefusal = take(guard, content, depth + 1, judge);
    if (guardRefusal !== undefined) return guardRefusal;
    try {
      // Re-read under the guard: another taker may have replaced the stale lock already, or its
      // owner beat after all.
      const again = readSighting(file);
      if (again?.content === found.content && again.mtimeMs === found.mtimeMs) unlinkSync(file);
    } finally {
      removeOwn(guard, content);
    }
  }
  throw new Error(`could not lock ${path.dirname(file)}`);
}

/** Decides whether a lock (or guard) read is held; remembers when each sighting was first made. */
class Judge {
  readonly #leaseMs: number;
  readonly #firstSeen = new Map<string, number>();

  constructor(leaseMs: number) {
    this.#leaseMs = leaseMs;
  }

  held(found: Sighting): Refusal | undefined {
    const owner = parseOwner(found.content);
    // A torn or foreign file, or no valid PID: stale.
    if (owner === undefined || !Number.isInteger(owner.pid) || owner.pid <= 0) return undefined;
    const here = { bootId: currentBootId(), pidNamespace: currentPidNamespace() };
    if (owner.pidNamespace === undefined)
      return heldAsBefore(owner, here.bootId) ? { pid: owner.pid } : undefined;
    if (
      here.bootId !== undefined &&
      owner.bootId === here.bootId &&
      owner.pidNamespace === here.pidNamespace
    ) {
      // Our own PID and start time: this process holds it. Our PID, another start: a dead one's.
      if (owner.pid === process.pid)
        return owner.startTime === startTimeOf(process.pid) ? { pid: owner.pid, self: true } : undefined;
      return isRunning(owner) ? { pid: owner.pid } : undefined;
    }
    return Date.now() < this.staleAt(found) ? { pid: owner.pid, leased: found } : undefined;
  }

  /**
   * When a lock judged by its heartbeat becomes stale unless it changes: a lease after its mtime,
   * or after it was first seen (an mtime ahead of this clock, as another host's may be).
   */
  staleAt(found: Sighting): number {
    const key = `${found.file}\n${found.mtimeMs}\n${found.content}`;
    const firstSeen = this.#firstSeen.get(key) ?? Date.now();
    this.#firstSeen.set(key, firstSeen);
    return Math.min(found.mtimeMs, firstSeen) + this.#leaseMs;
  }
}

/** Locks of earlier releases, judged as they were: they hold no namespace and no heartbeat. */
function heldAsBefore(owner: Owner, bootId: string | undefined): boolean {
  // Our own PID: a lock this process left (it is taken again), or a dead one's that had this PID.
  if (owner.pid === process.pid) return false;
  if (owner.startTime === undefined || bootId === undefined) return isAlive(owner.pid);
  if (owner.bootId !== bootId) return false;
  return isRunning(owner);
}

/** The owner, in this PID namespace under this boot, runs: its PID with its start time. */
function isRunning(owner: Owner): boolean {
  const startTime = startTimeOf(owner.pid);
  // Unreadable while the PID is live (/proc mounted with hidepid): the PID alone decides.
  if (startTime === undefined) return isAlive(owner.pid);
  return startTime === owner.startTime;
}

/**
 * Re-reads a lock judged by its heartbeat until `until` or until it changes: answers what shows
 * its owner beat (same content, another mtime), or nothing (it expired, was removed or replaced).
 */
async function watch(seen: Sighting, until: number, pollMs: number): Promise<Sighting | undefined> {
  for (;;) {
    const now = readSighting(seen.file);
    if (now?.content !== seen.content) return undefined;
    if (now.mtimeMs !== seen.mtimeMs) return now;
    const left = until - Date.now();
    if (left <= 0) return undefined;
    await sleep(Math.min(pollMs, left + 1));
  }
}

/** Touches the lock every `heartbeatMs` while it holds `content`; answers what stops it. */
function beat(
  dir: string,
  file: string,
  content: string,
  options: { heartbeatMs: number; leaseMs: number; warn: (message: string) => void },
): () => void {
  const timer = setInterval(() => {
    let fd: number | undefined;
    try {
      fd = openSync(file, "r");
      // Through the descriptor: what is touched is the file just read, never a successor.
      if (readFileSync(fd, "utf8") === content) {
        const now = new Date();
        futimesSync(fd, now, now);
        return;
      }
    } catch (error) {
      // A passing error of the filesystem: the next beat tries again.
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") return;
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
    clearInterval(timer);
    options.warn(
      `the lock of the embedded database in ${dir} is no longer this process's (removed, or taken over after ${options.leaseMs / 1000} s without a heartbeat?): another process may be using the directory; stop one of them`,
    );
  }, options.heartbeatMs).unref();
  return () => clearInterval(timer);
}

/** Links a complete file into place: false if `file` exists. Readers never see it half written. */
function createExclusive(file: string, content: string): boolean {
  const draft = `${file}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
  writeFileSync(draft, content, { flag: "wx" });
  try {
    linkSync(draft, file);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  } finally {
    unlinkSync(draft);
  }
}

/** Removes `file` if it holds `content`: a lock or guard that is not ours stays its owner's. */
function removeOwn(file: string, content: string): void {
  if (readText(file) === content) rmSync(file, { force: true });
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/** The file's content and mtime, read through one descriptor: both are one file's. */
function readSighting(file: string): Sighting | undefined {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  try {
    // The mtime first: a beat between the two reads shows in the next sighting.
    const mtimeMs = fstatSync(fd).mtimeMs;
    return { file, content: readFileSync(fd, "utf8"), mtimeMs };
  } finally {
    closeSync(fd);
  }
}

interface Owner {
  pid: number;
  /** Absent in a lock of an earlier release, or written where /proc is unavailable. */
  startTime?: string;
  bootId?: string;
  /** Absent in a lock of an earlier release; "-" where the writer could not read it. */
  pidNamespace?: string;
}

/**
 * `<pid>`, `<pid> <start time> <boot id>` or `<pid> <start time> <boot id> <pid namespace>`;
 * anything else (a torn or foreign file) is stale.
 */
function parseOwner(text: string): Owner | undefined {
  const match = /^\s*([0-9]+)(?: ([0-9]+) ([0-9a-f-]+)(?: ([0-9]+|-))?)?\s*$/.exec(text);
  if (!match) return undefined;
  const [, pid, startTime, bootId, pidNamespace] = match;
  if (!startTime || !bootId) return { pid: Number(pid) };
  return { pid: Number(pid), startTime, bootId, ...(pidNamespace ? { pidNamespace } : {}) };
}

function ownContent(): string {
  const startTime = startTimeOf(process.pid);
  const bootId = currentBootId();
  return startTime !== undefined && bootId !== undefined
    ? `${process.pid} ${startTime} ${bootId} ${currentPidNamespace() ?? "-"}\n`
    : `${process.pid}\n`;
}

/** Field 22 of /proc/<pid>/stat; the command name (field 2) may hold spaces and parentheses. */
function startTimeOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const value = fields[22 - 3];
    return value !== undefined && /^[0-9]+$/.test(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

let bootId: string | null | undefined;
function currentBootId(): string | undefined {
  if (bootId === undefined) {
    try {
      bootId = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
    } catch {
      bootId = null;
    }
  }
  return bootId ?? undefined;
}

let pidNamespace: string | null | undefined;
/** The inode of this process's PID namespace, from `pid:[4026531836]`. */
function currentPidNamespace(): string | undefined {
  if (pidNamespace === undefined) {
    try {
      pidNamespace = /^pid:\[([0-9]+)\]$/.exec(readlinkSync("/proc/self/ns/pid"))?.[1] ?? null;
    } catch {
      pidNamespace = null;
    }
  }
  return pidNamespace ?? undefined;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
