// Proves the embedded data directory's lock: it is held only by the live process that wrote it (a
// PID recycled by another process, or one from before a reboot, holds nothing), from another PID
// namespace (containers sharing a volume) by its owner's heartbeat, and in its own process a
// second time too; locks of earlier releases are still honoured, a takeover that died half-way
// does not block the directory, and of several processes taking over one stale lock at once
// exactly one wins.
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { openDatabase } from "../../src/db/database.ts";
import { acquireDirLock } from "../../src/db/dir-lock.ts";

const linuxOnly = process.platform === "linux" ? false : "the start time and boot id come from /proc";
const bootId = () => readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
/** The inode of this process's PID namespace, as the lock holds it. */
const pidNamespace = () => /[0-9]+/.exec(readlinkSync("/proc/self/ns/pid"))?.[0] ?? "";

/** Field 22 of /proc/<pid>/stat, after the command name in parentheses. */
function startTimeOf(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? "";
}

/** What this process writes in a lock. */
const ownLock = () => `${process.pid} ${startTimeOf(process.pid)} ${bootId()} ${pidNamespace()}\n`;

function lockedDir(content: string): { dir: string; file: string } {
  const dir = mkdtempSync(path.join(tmpdir(), "emisor-lock-"));
  const file = path.join(dir, "emisor.lock");
  writeFileSync(file, content);
  return { dir, file };
}

/** The PID of a process that has exited. */
function deadPid(): number {
  const pid = spawnSync(process.execPath, ["-e", ""]).pid;
  assert.ok(pid);
  return pid;
}

const refusedBy = (pid: number) =>
  new RegExp(`is in use by process ${pid}; stop it first, or use DATABASE_URL`);

test("a lock is held by the process with its PID and start time under this boot, not by a recycled PID", {
  skip: linuxOnly,
}, async () => {
  // Regression (operations audit): the PID alone was checked, so a lock whose PID an unrelated
  // process had since been given refused every start, forever.
  const live = process.ppid;
  for (const namespace of [` ${pidNamespace()}`, ""]) {
    const held = lockedDir(`${live} ${startTimeOf(live)} ${bootId()}${namespace}\n`);
    await assert.rejects(async () => acquireDirLock(held.dir), refusedBy(live));
    assert.equal(readFileSync(held.file, "utf8"), `${live} ${startTimeOf(live)} ${bootId()}${namespace}\n`);
  }

  const recycled = `${live} ${Number(startTimeOf(live)) + 1} ${bootId()}\n`;
  const beforeReboot = `${live} ${startTimeOf(live)} 00000000-0000-4000-8000-000000000000\n`;
  for (const stale of [
    recycled,
    recycled.replace("\n", ` ${pidNamespace()}\n`),
    beforeReboot,
    `1 ${Number(startTimeOf(1)) + 1} ${bootId()}\n`,
    `${process.pid} ${Number(startTimeOf(process.pid)) + 1} ${bootId()} ${pidNamespace()}\n`,
    "",
    "garbage\n",
  ]) {
    const { dir, file } = lockedDir(stale);
    const release = await acquireDirLock(dir);
    assert.equal(readFileSync(file, "utf8"), ownLock(), stale);
    release();
    assert.deepEqual(readdirSync(dir), [], "the lock, its guard and its draft are gone");
  }
});

test("a live owner keeps the lock: another process is refused, naming it", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "emisor-lock-"));
  const [owner] = await startTakers(1);
  assert.ok(owner);
  try {
    assert.equal(await owner.take(dir, Date.now()), "won");
    await assert.rejects(async () => acquireDirLock(dir), refusedBy(owner.child.pid ?? 0));
  } finally {
    await owner.stop();
  }
  // Gone with its owner: the lock is stale and taken over.
  (await acquireDirLock(dir))();
});

test("a lock of an earlier release, the PID alone, is still honoured; a dead PID's is taken over", async () => {
  const held = lockedDir(`${process.ppid}`);
  await assert.rejects(async () => acquireDirLock(held.dir), refusedBy(process.ppid));
  const stale = lockedDir(`${deadPid()}\n`);
  const release = await acquireDirLock(stale.dir);
  assert.match(readFileSync(stale.file, "utf8"), new RegExp(`^${process.pid}[ \n]`));
  release();
  assert.equal(existsSync(stale.file), false);
});

test("a takeover guard left by a process that died is itself taken over", { skip: linuxOnly }, async () => {
  const staleLock = `${deadPid()} 1 ${bootId()}\n`;
  const { dir, file } = lockedDir(staleLock);
  const guard = `${file}.takeover-${createHash("sha256").update(staleLock).digest("hex").slice(0, 16)}`;
  writeFileSync(guard, `${deadPid()} 1 ${bootId()} ${pidNamespace()}\n`);
  (await acquireDirLock(dir))();
  assert.deepEqual(readdirSync(dir), []);
});

test("of four processes taking over one stale lock at once, exactly one wins, in every round", async () => {
  // Regression (operations audit): each read the stale lock, removed it and wrote its own, so
  // one could remove the lock another had just written and both went on (1 race in 30).
  const takers = await startTakers(4);
  try {
    for (let round = 0; round < 20; round++) {
      // A recycled PID (this process, another start time) and an earlier release's dead PID.
      const stale = round % 2 === 0 && !linuxOnly ? `${process.pid} 1 ${bootId()}\n` : `${deadPid()}\n`;
      const { dir } = lockedDir(stale);
      const at = Date.now() + 100;
      const answers = await Promise.all(takers.map((taker) => taker.take(dir, at)));
      const winners = answers.filter((answer) => answer === "won");
      assert.equal(winners.length, 1, `round ${round}: ${answers.join(" | ")}`);
      for (const answer of answers)
        if (answer !== "won")
          assert.match(answer, /^refused the embedded database in .* is in use by process \d+/);
    }
  } finally {
    await Promise.all(takers.map((taker) => taker.stop()));
  }
});

/** A lease and heartbeat short enough for a test; the service's are 60 s and 5 s. */
// Short enough for a quick test, with room for a loaded CI machine: the bounds below that a stall
// could break allow a second more than the lease; those a stall cannot break are exact.
const fast = { leaseMs: 1_000, heartbeatMs: 50 };

/** A lock as a process of another PID namespace (or another boot) writes it, touched `ageMs` ago. */
function foreignLock(
  ageMs: number,
  where: "namespace" | "boot" = "namespace",
): { dir: string; file: string } {
  const namespace = where === "namespace" ? String(Number(pidNamespace()) + 1) : pidNamespace();
  const boot = where === "boot" ? "00000000-0000-4000-8000-000000000000" : bootId();
  // PID 1 with this process's start time: the auditor's case, where the owner's PID is the
  // reader's own (both PID 1 in their containers) or another process's of this namespace.
  const locked = lockedDir(`1 ${startTimeOf(process.pid)} ${boot} ${namespace}\n`);
  const at = new Date(Date.now() - ageMs);
  utimesSync(locked.file, at, at);
  return locked;
}

const foreignRefusal =
  /in use by process 1 of another PID namespace or host .*; stop it first, or use DATABASE_URL for several processes\. If it is gone, the lock is free from /;

test("a lock of another PID namespace whose heartbeat advances is refused, as soon as it beats", {
  skip: linuxOnly,
}, async () => {
  // Regression (operations audit): from another PID namespace a live owner looked dead (its PID
  // absent, or another process's), so containers sharing a volume each took the lock.
  for (const where of ["namespace", "boot"] as const) {
    const { dir, file } = foreignLock(0, where);
    const content = readFileSync(file, "utf8");
    const owner = setInterval(() => {
      const now = new Date();
      utimesSync(file, now, now);
    }, fast.heartbeatMs);
    const warnings: string[] = [];
    const started = Date.now();
    try {
      await assert.rejects(
        async () => acquireDirLock(dir, { ...fast, warn: (message) => warnings.push(message) }),
        (error: Error) =>
          foreignRefusal.test(error.message) && /alive: its heartbeat advanced/.test(error.message),
      );
    } finally {
      clearInterval(owner);
    }
    assert.ok(
      Date.now() - started < fast.leaseMs,
      `refused after ${Date.now() - started} ms, not at the first beat`,
    );
    assert.equal(readFileSync(file, "utf8"), content, "the owner's lock is untouched");
    assert.equal(warnings.length, 1);
    assert.match(
      warnings[0] ?? "",
      /locked by process 1 of another PID namespace or host, .*: waiting up to 1 s/,
    );
  }
});

test("a lock of another PID namespace whose heartbeat stopped is taken over once its lease runs out", {
  skip: linuxOnly,
}, async () => {
  // A container restarted after a crash finds its previous run's lock, touched moments ago: it
  // waits out the lease, sees no beat, and takes the lock over.
  for (const where of ["namespace", "boot"] as const) {
    const { dir, file } = foreignLock(100, where);
    const warnings: string[] = [];
    const started = Date.now();
    const release = await acquireDirLock(dir, { ...fast, warn: (message) => warnings.push(message) });
    const waited = Date.now() - started;
    assert.ok(waited >= fast.leaseMs - 100 - 20 && waited < fast.leaseMs + 1_000, `waited ${waited} ms`);
    assert.equal(readFileSync(file, "utf8"), ownLock());
    assert.equal(warnings.length, 1);
    release();
    assert.deepEqual(readdirSync(dir), []);
  }
  // Touched more than a lease ago: stale at once, with nothing to say.
  const { dir, file } = foreignLock(fast.leaseMs + 1_000);
  const warnings: string[] = [];
  const started = Date.now();
  const release = await acquireDirLock(dir, { ...fast, warn: (message) => warnings.push(message) });
  assert.ok(Date.now() - started < fast.leaseMs / 2);
  assert.equal(readFileSync(file, "utf8"), ownLock());
  assert.deepEqual(warnings, []);
  release();
  // Touched "in an hour" (another host's clock): seen unchanged for a whole lease, it is stale.
  const ahead = foreignLock(-3_600_000);
  const aheadStarted = Date.now();
  (await acquireDirLock(ahead.dir, fast))();
  assert.ok(Date.now() - aheadStarted < fast.leaseMs * 2 + 1_000, "the wait is bounded by the lease");
});

test("the owner's heartbeat advances its lock's mtime, and stops when the lock is no longer its own", {
  skip: linuxOnly,
}, async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "emisor-lock-"));
  const file = path.join(dir, "emisor.lock");
  const warnings: string[] = [];
  const release = await acquireDirLock(dir, { ...fast, warn: (message) => warnings.push(message) });
  const past = new Date(Date.now() - 10_000);
  utimesSync(file, past, past);
  await until(() => statSync(file).mtimeMs > past.getTime() + 5_000);
  assert.deepEqual(warnings, []);

  // Replaced (taken over after a pause longer than the lease): not touched, and the owner warns.
  const foreign = `1 ${startTimeOf(process.pid)} ${bootId()} ${Number(pidNamespace()) + 1}\n`;
  writeFileSync(file, foreign);
  utimesSync(file, past, past);
  await until(() => warnings.length > 0);
  await sleep(fast.heartbeatMs * 3);
  assert.ok(Math.abs(statSync(file).mtimeMs - past.getTime()) < 1, "a lock not its own is not touched");
  assert.equal(warnings.length, 1);
  assert.match(warnings[0] ?? "", /is no longer this process's/);
  release();
  assert.equal(readFileSync(file, "utf8"), foreign, "release removes only its own lock");
});

test("a second open of a directory in the process that holds its lock is refused", {
  skip: linuxOnly,
}, async () => {
  // Regression (operations audit): a lock naming this process was taken as one it had left, so
  // one process could open the same directory twice.
  const dir = mkdtempSync(path.join(tmpdir(), "emisor-lock-"));
  const release = await acquireDirLock(dir);
  const again = new RegExp(
    `in ${dir}.* is already open in this process \\(${process.pid}\\); close it first`,
  );
  await assert.rejects(async () => acquireDirLock(dir), again);
  // Under another name (a symbolic link): the lock's content tells.
  const link = path.join(mkdtempSync(path.join(tmpdir(), "emisor-lock-")), "link");
  symlinkSync(dir, link);
  await assert.rejects(async () => acquireDirLock(link), /is already open in this process/);
  assert.equal(readFileSync(path.join(dir, "emisor.lock"), "utf8"), ownLock());
  release();
  (await acquireDirLock(link))();
  assert.deepEqual(readdirSync(dir), []);
});

test("a start whose database fails to open leaves the directory unlocked", async () => {
  // The lock refuses a second open in its process, so a failed open must not keep it: a retry
  // would be told the directory is open here instead of why it fails.
  const dir = mkdtempSync(path.join(tmpdir(), "emisor-lock-"));
  writeFileSync(path.join(dir, "PG_VERSION"), "9\n");
  for (let attempt = 0; attempt < 2; attempt++)
    await assert.rejects(openDatabase({ dataDir: dir }), /PGlite failed to initialize properly/);
  assert.equal(existsSync(path.join(dir, "emisor.lock")), false);
});

const unshareWorks =
  process.platform === "linux" &&
  spawnSync("unshare", ["--pid", "--fork", "--mount-proc", "true"], { stdio: "ignore" }).status === 0;

test("processes in PID namespaces of their own, each PID 1, take one directory's lock one at a time", {
  skip: unshareWorks
    ? false
    : "`unshare --pid --fork --mount-proc` is not permitted here (it needs root or user namespaces)",
  timeout: 30_000,
}, async () => {
  // Regression (operations audit): two containers and the host sharing one data volume all took
  // the lock while the first ran. Lease 2 s, heartbeat 100 ms: the run takes about 3 s.
  const dir = mkdtempSync(path.join(tmpdir(), "emisor-lock-"));
  const [first, second] = await startTakers(2, ["unshare", "--pid", "--fork", "--mount-proc"]);
  assert.ok(first && second);
  const options = { leaseMs: 2_000, heartbeatMs: 100 };
  const inOtherNamespace =
    /^refused the embedded database in .* is in use by process 1 of another PID namespace or host .*alive: its heartbeat advanced/;
  try {
    assert.equal(await first.take(dir, Date.now(), options), "won");
    assert.match(await second.take(dir, Date.now(), options), inOtherNamespace);
    assert.match(readFileSync(path.join(dir, "emisor.lock"), "utf8"), /^1 [0-9]+ [0-9a-f-]+ [0-9]+\n$/);
    await assert.rejects(
      async () => acquireDirLock(dir, options),
      (error: Error) => inOtherNamespace.test(`refused ${error.message}`),
    );
    // The first dies without releasing (a crash): the second, restarted, waits out the lease.
    await first.stop();
    const started = Date.now();
    assert.equal(await second.take(dir, Date.now(), options), "won");
    assert.ok(Date.now() - started > options.leaseMs / 2, "it waited for the lease to run out");
    await assert.rejects(
      async () => acquireDirLock(dir, options),
      (error: Error) => inOtherNamespace.test(`refused ${error.message}`),
    );
  } finally {
    await Promise.all([first.stop(), second.stop()]);
  }
});

interface Taker {
  child: ChildProcess;
  /**
   * Takes the lock of `dir` at the moment `at` (epoch ms), with a lease and heartbeat of its own
   * if given: "won" or "refused <message>".
   */
  take(dir: string, at: number, options?: { leaseMs: number; heartbeatMs: number }): Promise<string>;
  stop(): Promise<void>;
}

/**
 * Processes running test/helpers/dir-lock-child.ts, each ready to take locks; run under `wrapper`
 * (a command and its arguments) if given.
 */
async function startTakers(count: number, wrapper: string[] = []): Promise<Taker[]> {
  return Promise.all(
    Array.from({ length: count }, async () => {
      const command = [...wrapper, process.execPath, "--import", "tsx", "test/helpers/dir-lock-child.ts"];
      const child = spawn(command[0] ?? "", command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
      const waiting: Array<(line: string) => void> = [];
      lines.on("line", (line) => waiting.shift()?.(line));
      const next = () => new Promise<string>((resolve) => waiting.push(resolve));
      assert.equal(await next(), "ready");
      return {
        child,
        take: (dir, at, options) => {
          const answer = next();
          child.stdin?.write(`${dir} ${at}${options ? ` ${options.leaseMs} ${options.heartbeatMs}` : ""}\n`);
          return answer;
        },
        stop: async () => {
          child.stdin?.end();
          await exited;
        },
      } satisfies Taker;
    }),
  );
}

/** Waits for `condition`, up to 5 s (a beat is 50 ms: a loaded machine may delay a few). */
async function until(condition: () => boolean): Promise<void> {
  for (const deadline = Date.now() + 5_000; !condition(); ) {
    assert.ok(Date.now() < deadline, "timed out waiting");
    await sleep(10);
  }
}
