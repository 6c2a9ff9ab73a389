// Proves that a process killed at any instant of its start leaves an embedded data directory that
// the next start opens: the instants that used to stop every later start are planted exactly with
// test/helpers/crash-point.ts (a SIGKILL just before one file operation), as `npm start` runs.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { loadMasterKey } from "../src/crypto/keys.ts";
import { bannerOf } from "./helpers/banner.ts";

const skip = process.env.DATABASE_URL ? "the embedded engine's data directory only" : false;

function emisor(dataDir: string, extra: Record<string, string>, entry = "src/main.ts"): ChildProcess {
  // No EMISOR_MASTER_KEY: in sandbox the key is generated in the data directory, as `npm start` does.
  const { EMISOR_MASTER_KEY: _unused, ...inherited } = process.env;
  return spawn(process.execPath, ["--import", "tsx", entry], {
    env: { ...inherited, DATABASE_URL: "", EMISOR_DATA_DIR: dataDir, PORT: "0", LOG_LEVEL: "warn", ...extra },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

/** A start killed just before the operation `point` names; what it died at. */
async function killedAt(dataDir: string, point: string): Promise<string> {
  const note = path.join(dataDir, "..", `crash-note-${path.basename(dataDir)}`);
  const child = emisor(
    dataDir,
    { CHAOS_CRASH_AT: point, CHAOS_CRASH_NOTE: note },
    "test/helpers/crash-point.ts",
  );
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
    // Up without meeting the planted point: stopped, and the assertion below says so.
    if (output.includes("Log in:")) child.kill("SIGTERM");
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  const [code, signal] = await new Promise<[number | null, string | null]>((resolve) =>
    child.once("exit", (c, s) => resolve([c, s])),
  );
  assert.equal(signal, "SIGKILL", `the start planted at ${point} ended with ${code} instead:\n${output}`);
  return readFileSync(note, "utf8");
}

test("a start killed where it left the embedded directory unusable is followed by one that works", {
  skip,
  timeout: 240_000,
}, async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "emisor-crash-"));
  const size = (file: string) =>
    existsSync(path.join(dataDir, file)) ? statSync(path.join(dataDir, file)).size : -1;

  // The first start copies a new cluster in; killed after PG_VERSION, before pg_hba.conf.
  assert.match(await killedAt(dataDir, "write:1:pg_hba.conf"), /^write pg_hba\.conf/);
  assert.ok(size("PG_VERSION") > 0 && size("pg_hba.conf") <= 0);

  // The next start gets past it, and is killed while writing the generated master key (the
  // file, or the file it is written in first).
  assert.match(await killedAt(dataDir, String.raw`write:1:master\.key(\..*)?`), /^write master\.key/);

  // The next start gets past that, and is killed between creating postmaster.pid and filling it.
  assert.match(await killedAt(dataDir, "write:1:postmaster.pid"), /^write postmaster\.pid/);
  assert.equal(size("postmaster.pid"), 0);

  // And the next one starts: the sandbox tenant's credentials work, SIGTERM exits 0.
  const child = emisor(dataDir, {});
  const banner = await bannerOf(child);
  const apiKey = /api_key: +(\S+)/.exec(banner)?.[1];
  const password = /password: +(\S+)/.exec(banner)?.[1];
  const base = /listening on (http:\/\/\S+)/.exec(banner)?.[1];
  assert.ok(apiKey && password && base, banner);
  const login = await fetch(`${base}/v1/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ api_client: { api_key: apiKey, password } }),
  });
  assert.equal(login.status, 200);
  const exit = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  assert.equal(await exit, 0);
});

test("an empty generated key file (a start killed while creating it) is replaced by a new key", () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "emisor-key-"));
  writeFileSync(path.join(dataDir, "master.key"), "");
  const warnings: string[] = [];
  const key = loadMasterKey({ masterKey: undefined, dataDir, sandbox: true, warn: (m) => warnings.push(m) });
  assert.equal(key.length, 32);
  assert.equal(readFileSync(path.join(dataDir, "master.key"), "utf8"), key.toString("hex"));
  // The next start reads the same key; no scratch file is left behind.
  assert.deepEqual(loadMasterKey({ masterKey: undefined, dataDir, sandbox: true, warn: () => {} }), key);
  assert.deepEqual(readdirSync(dataDir), ["master.key"]);
  assert.equal(warnings.length, 1);
});
