/**
 * Emisor's process entry with a crash planted at one file operation: the N-th operation of a kind
 * on a file under the data directory kills the process with SIGKILL just before it happens, as a
 * crash between two system calls would. PGlite's file system (Emscripten's NODEFS) and Emisor's
 * own files (the lock, the generated master key) all go through node:fs, so every instant at
 * which the data directory changes can be chosen, not only the ones a timer happens to hit.
 *
 *   CHAOS_CRASH_AT="write:3:postmaster.pid"  the 3rd write to postmaster.pid (a regular expression
 *                                            matching a whole path in the directory)
 *   CHAOS_CRASH_AT="any:1200"                the 1,200th change of any kind anywhere in the directory
 *   CHAOS_CRASH_NOTE=file                    where the operation it died at is written
 *   CHAOS_CRASH_COUNTS=file                  the operations counted so far, rewritten every 100 ms
 *
 * Kinds: open (for writing), write, truncate, rename, unlink, mkdir, and any (all of them).
 */
import fs from "node:fs";
import path from "node:path";
import { main } from "../../src/main.ts";

const dataDir = path.resolve(process.env.EMISOR_DATA_DIR || "./.emisor/data");
const [kind = "any", at = "0", only = ""] = (process.env.CHAOS_CRASH_AT ?? "").split(":");
const crashAt = Number(at);
const pathPattern = only ? new RegExp(`^(?:${only})$`) : undefined;
const note = process.env.CHAOS_CRASH_NOTE;
const countsFile = process.env.CHAOS_CRASH_COUNTS;
const counts: Record<string, number> = {};
const fdPaths = new Map<number, string>();
const original = {
  openSync: fs.openSync,
  writeSync: fs.writeSync,
  ftruncateSync: fs.ftruncateSync,
  truncateSync: fs.truncateSync,
  renameSync: fs.renameSync,
  unlinkSync: fs.unlinkSync,
  rmSync: fs.rmSync,
  rmdirSync: fs.rmdirSync,
  mkdirSync: fs.mkdirSync,
  writeFileSync: fs.writeFileSync,
};

/** Counts one change of `target`; dies before it when it is the planted one. */
let matching = 0;
function change(opKind: string, target: string | undefined, detail: string): void {
  if (!target || (target !== dataDir && !target.startsWith(`${dataDir}${path.sep}`))) return;
  const relative = path.relative(dataDir, target);
  counts[opKind] = (counts[opKind] ?? 0) + 1;
  counts.any = (counts.any ?? 0) + 1;
  if ((kind !== "any" && kind !== opKind) || (pathPattern && !pathPattern.test(relative))) return;
  matching += 1;
  counts.matching = matching;
  if (matching !== crashAt) return;
  if (note) original.writeFileSync(note, `${opKind} ${relative} ${detail}`);
  process.kill(process.pid, "SIGKILL");
}

const asPath = (value: unknown) => (typeof value === "string" ? path.resolve(value) : undefined);
const writable = (flags: unknown) =>
  typeof flags === "number"
    ? (flags &
        (fs.constants.O_WRONLY | fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_TRUNC)) !==
      0
    : typeof flags === "string" && /[wa+]/.test(flags);

type Loose = (...args: unknown[]) => unknown;
const patch = (name: keyof typeof original, before: (args: unknown[]) => void, after?: Loose) => {
  const fn = original[name] as unknown as Loose;
  (fs as unknown as Record<string, Loose>)[name] = (...args: unknown[]) => {
    before(args);
    const result = fn(...args);
    after?.(result, ...args);
    return result;
  };
};
patch(
  "openSync",
  (args) => {
    if (writable(args[1])) change("open", asPath(args[0]), String(args[1]));
  },
  (fd, file) => {
    const resolved = asPath(file);
    if (typeof fd === "number" && resolved) fdPaths.set(fd, resolved);
  },
);
patch("writeSync", (args) => change("write", fdPaths.get(args[0] as number), `${args[3] ?? ""} bytes`));
patch("ftruncateSync", (args) => change("truncate", fdPaths.get(args[0] as number), String(args[1] ?? 0)));
patch("truncateSync", (args) => change("truncate", asPath(args[0]), String(args[1] ?? 0)));
patch("renameSync", (args) => change("rename", asPath(args[1]), `from ${asPath(args[0])}`));
patch("unlinkSync", (args) => change("unlink", asPath(args[0]), ""));
patch("rmSync", (args) => change("unlink", asPath(args[0]), ""));
patch("rmdirSync", (args) => change("unlink", asPath(args[0]), ""));
patch("mkdirSync", (args) => change("mkdir", asPath(args[0]), ""));

if (countsFile) setInterval(() => original.writeFileSync(countsFile, JSON.stringify(counts)), 100).unref();

main().catch((error: unknown) => {
  process.stderr.write(`emisor: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
