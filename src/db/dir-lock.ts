import { createHash, randomBytes } from "node:crypto";
import { linkSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import path from "node:path";

/**
 * A lock file naming the process that owns an embedded data directory. A second process gets
 * a clear error instead of corrupting the database; a lock left by a dead process is taken over.
 *
 * The file holds `<pid> <start time> <boot id>` (Linux; the start time is field 22 of
 * /proc/<pid>/stat, in clock ticks since boot). The lock is held while a process with that PID,
 * started at that time, runs under the same boot: a PID recycled by an unrelated process, or one
 * from before a reboot, does not hold it. Without /proc (and for a lock of an earlier release,
 * which holds the PID alone) a live PID holds it.
 *
 * A lock file appears whole: it is written under a name of its own and linked into place, which
 * fails if the lock exists. A stale one is removed only by the holder of its takeover guard, a
 * file named after the content judged stale and created the same way; the holder removes the lock
 * only if it still holds that content. Of several processes taking over one stale lock at once,
 * one gets the guard; the others find it held by a live process and are refused, or find it gone
 * and then the new lock. Nothing else removes a lock (the owner, at close, only its own), and no
 * two processes write the same content, so what the guard's holder read again is what it removes.
 * A guard left by a process that died holding it is stale and taken over the same way.
 */
export function acquireDirLock(dir: string): () => void {
  const file = path.join(dir, "emisor.lock");
  const mine = ownContent();
  const owner = take(file, mine, 0);
  if (owner !== undefined)
    throw new Error(
      `the embedded database in ${dir} is in use by process ${owner}; stop it first, or use DATABASE_URL for several processes`,
    );
  return () => removeOwn(file, mine);
}

/** Guards within guards: each level needs a process to die inside the one before. */
const guardDepthMax = 4;

/**
 * Creates `file` holding `content`, taking over a stale one. Answers undefined when it did, or
 * the PID of the live process that holds the file (or is taking it over).
 */
function take(file: string, content: string, depth: number): number | undefined {
  if (depth > guardDepthMax)
    throw new Error(`could not lock ${path.dirname(file)}: too many takeover guards`);
  for (let attempt = 0; attempt < 8; attempt++) {
    if (createExclusive(file, content)) return undefined;
    const found = readText(file);
    if (found === undefined) continue;
    const owner = parseOwner(found);
    if (owner !== undefined && isHeld(owner)) return owner.pid;
    const guard = `${file}.takeover-${createHash("sha256").update(found).digest("hex").slice(0, 16)}`;
    const guardOwner = take(guard, content, depth + 1);
    if (guardOwner !== undefined) return guardOwner;
    try {
      // Re-read under the guard: another taker may have replaced the stale lock already.
      if (readText(file) === found) unlinkSync(file);
    } finally {
      removeOwn(guard, content);
    }
  }
  throw new Error(`could not lock ${path.dirname(file)}`);
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

interface Owner {
  pid: number;
  /** Absent in a lock of an earlier release, or written where /proc is unavailable. */
  startTime?: string;
  bootId?: string;
}

/** `<pid>` or `<pid> <start time> <boot id>`; anything else (a torn or foreign file) is stale. */
function parseOwner(text: string): Owner | undefined {
  const match = /^\s*([0-9]+)(?: ([0-9]+) ([0-9a-f-]+))?\s*$/.exec(text);
  if (!match) return undefined;
  const pid = Number(match[1]);
  return match[2] && match[3] ? { pid, startTime: match[2], bootId: match[3] } : { pid };
}

function ownContent(): string {
  const startTime = startTimeOf(process.pid);
  const bootId = currentBootId();
  return startTime !== undefined && bootId !== undefined
    ? `${process.pid} ${startTime} ${bootId}\n`
    : `${process.pid}\n`;
}

function isHeld(owner: Owner): boolean {
  // Our own PID: a lock this process left (it is taken again), or a dead one's that had this PID.
  if (owner.pid === process.pid || !Number.isInteger(owner.pid) || owner.pid <= 0) return false;
  const bootId = currentBootId();
  if (owner.startTime === undefined || bootId === undefined) return isAlive(owner.pid);
  if (owner.bootId !== bootId) return false;
  const startTime = startTimeOf(owner.pid);
  // Unreadable while the PID is live (/proc mounted with hidepid): the PID alone decides.
  if (startTime === undefined) return isAlive(owner.pid);
  return startTime === owner.startTime;
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

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
