// Proves the embedded data directory's lock: it is held only by the live process that wrote it (a
// PID recycled by another process, or one from before a reboot, holds nothing), a lock of an
// earlier release (the PID alone) is still honoured, a takeover that died half-way does not block
// the directory, and of several processes taking over one stale lock at once exactly one wins.
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { test } from "node:test";
import { acquireDirLock } from "../../src/db/dir-lock.ts";

const linuxOnly = process.platform === "linux" ? false : "the start time and boot id come from /proc";
const bootId = () => readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();

/** Field 22 of /proc/<pid>/stat, after the command name in parentheses. */
function startTimeOf(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? "";
}

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
}, () => {
  // Regression (operations audit): the PID alone was checked, so a lock whose PID an unrelated
  // process had since been given refused every start, forever.
  const live = process.ppid;
  const held = lockedDir(`${live} ${startTimeOf(live)} ${bootId()}\n`);
  assert.throws(() => acquireDirLock(held.dir), refusedBy(live));
  assert.equal(readFileSync(held.file, "utf8"), `${live} ${startTimeOf(live)} ${bootId()}\n`);

  const recycled = `${live} ${Number(startTimeOf(live)) + 1} ${bootId()}\n`;
  const beforeReboot = `${live} ${startTimeOf(live)} 00000000-0000-4000-8000-000000000000\n`;
  for (const stale of [
    recycled,
    beforeReboot,
    `1 ${Number(startTimeOf(1)) + 1} ${bootId()}\n`,
    "",
    "garbage\n",
  ]) {
    const { dir, file } = lockedDir(stale);
    const release = acquireDirLock(dir);
    assert.equal(
      readFileSync(file, "utf8"),
      `${process.pid} ${startTimeOf(process.pid)} ${bootId()}\n`,
      stale,
    );
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
    assert.throws(() => acquireDirLock(dir), refusedBy(owner.child.pid ?? 0));
  } finally {
    await owner.stop();
  }
  // Gone with its owner: the lock is stale and taken over.
  acquireDirLock(dir)();
});

test("a lock of an earlier release, the PID alone, is still honoured; a dead PID's is taken over", () => {
  const held = lockedDir(`${process.ppid}`);
  assert.throws(() => acquireDirLock(held.dir), refusedBy(process.ppid));
  const stale = lockedDir(`${deadPid()}\n`);
  const release = acquireDirLock(stale.dir);
  assert.match(readFileSync(stale.file, "utf8"), new RegExp(`^${process.pid}[ \n]`));
  release();
  assert.equal(existsSync(stale.file), false);
});

test("a takeover guard left by a process that died is itself taken over", { skip: linuxOnly }, () => {
  const staleLock = `${deadPid()} 1 ${bootId()}\n`;
  const { dir, file } = lockedDir(staleLock);
  const guard = `${file}.takeover-${createHash("sha256").update(staleLock).digest("hex").slice(0, 16)}`;
  writeFileSync(guard, `${deadPid()} 1 ${bootId()}\n`);
  acquireDirLock(dir)();
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

interface Taker {
  child: ChildProcess;
  /** Takes the lock of `dir` at the moment `at` (epoch ms): "won" or "refused <message>". */
  take(dir: string, at: number): Promise<string>;
  stop(): Promise<void>;
}

/** Processes running test/helpers/dir-lock-child.ts, each ready to take locks. */
async function startTakers(count: number): Promise<Taker[]> {
  return Promise.all(
    Array.from({ length: count }, async () => {
      const child = spawn(process.execPath, ["--import", "tsx", "test/helpers/dir-lock-child.ts"], {
        stdio: ["pipe", "pipe", "inherit"],
      });
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
      const waiting: Array<(line: string) => void> = [];
      lines.on("line", (line) => waiting.shift()?.(line));
      const next = () => new Promise<string>((resolve) => waiting.push(resolve));
      assert.equal(await next(), "ready");
      return {
        child,
        take: (dir, at) => {
          const answer = next();
          child.stdin?.write(`${dir} ${at}\n`);
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
