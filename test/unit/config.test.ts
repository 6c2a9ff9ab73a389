// Proves that every malformed setting stops the start with a message naming its variable and what
// it accepts, and that the accepted forms still load.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { ConfigError, loadConfig } from "../../src/config.ts";
import { limits } from "../../src/limits.ts";

type Env = Record<string, string>;

/** loadConfig refuses `env` with a ConfigError whose message matches `message`. */
function refuses(env: Env, message: RegExp): void {
  assert.throws(
    () => loadConfig(env),
    (error: unknown) => error instanceof ConfigError && message.test(error.message),
    `${JSON.stringify(env)} should be refused with ${message}`,
  );
}

test("DATABASE_URL must be a postgres:// URL with a valid port, and is never echoed", () => {
  // Regression (operations audit): pg read "notaurl" as a path under the host "base" and
  // mysql://x as the host x ("getaddrinfo ENOTFOUND base"); a port of 99999 gave "Invalid URL".
  for (const bad of ["notaurl", "mysql://x", "http://db/emisor", "postgres:/db", "/var/run/postgresql"])
    refuses({ DATABASE_URL: bad }, /^DATABASE_URL must be a PostgreSQL URL, postgres:\/\/user:password@host/);
  for (const port of ["99999", "0", "54x", "-1"])
    refuses(
      { DATABASE_URL: `postgres://u:secret@db:${port}/emisor` },
      /^DATABASE_URL's port must be a number from 1 to 65535/,
    );
  refuses({ DATABASE_URL: "postgres://u:secret@db:5432:1/emisor" }, /^DATABASE_URL's port/);
  refuses(
    { DATABASE_URL: "postgres://u:secret@d<b>/emisor" },
    /^DATABASE_URL must be a PostgreSQL URL.*not a valid URL/,
  );
  // No part of a password reaches the message, even one whose unencoded "/", "#" or "?" makes
  // part of it read as the port. Regression (audit): `got "s3cr"` for "s3cr/et".
  for (const url of [
    "postgres://u:hunter2@db:99999/emisor",
    "postgres://app:hunter2/et@db:5432/emisor",
    "postgres://app:hunter2#et@db/emisor",
    "postgres://app:hunter2?ss@db/emisor",
  ]) {
    assert.throws(
      () => loadConfig({ DATABASE_URL: url }),
      (error: unknown) => error instanceof ConfigError && !/hunter2/.test(error.message),
      url,
    );
  }
  const accepted = [
    "postgres://postgres@127.0.0.1:5432/test",
    "postgresql://u:p%40ss@db.internal/emisor?sslmode=require",
    "POSTGRES://u@[::1]:5432/emisor",
    "postgres://u:p@ss word@db/emisor",
    "postgres://u:pw@/emisor?host=/var/run/postgresql",
    "postgres:///emisor",
    "postgres://db:5432",
  ];
  for (const url of accepted) assert.equal(loadConfig({ DATABASE_URL: url }).databaseUrl, url);
  assert.equal(loadConfig({ DATABASE_URL: "" }).databaseUrl, undefined);
});

test("LOG_LEVEL is one of pino's levels", () => {
  // Regression (operations audit): pino stopped the start with "default level:loud must be
  // included in custom levels", naming no variable.
  refuses(
    { LOG_LEVEL: "loud" },
    /^LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent; got "loud"/,
  );
  refuses({ LOG_LEVEL: "warning" }, /^LOG_LEVEL/);
  assert.equal(loadConfig({}).logLevel, "info");
  assert.equal(loadConfig({ LOG_LEVEL: "silent" }).logLevel, "silent");
  assert.equal(loadConfig({ LOG_LEVEL: "DEBUG" }).logLevel, "debug");
});

test("HOST is an IP address or a host name", () => {
  for (const bad of [
    "bad host",
    "bad_host",
    "[::1]",
    "127.0.0.1:3000",
    "http://localhost",
    "999.1.1.1",
    "-x.example",
  ])
    refuses({ HOST: bad }, /^HOST must be an IP address \(127\.0\.0\.1, 0\.0\.0\.0, ::\) or a host name/);
  for (const good of ["0.0.0.0", "::", "::1", "localhost", "api.emisor.internal", "host-1."])
    assert.equal(loadConfig({ HOST: good }).host, good);
  assert.equal(loadConfig({ HOST: "" }).host, "127.0.0.1");
});

test("EMISOR_SIM_SPEI_JOURNAL must be a file that can be appended to; an existing journal is kept", () => {
  // Regression (operations audit): any path was accepted, and the simulator failed on its first
  // order (or on reading the journal back) instead of at start.
  const dir = mkdtempSync(path.join(tmpdir(), "emisor-config-"));
  refuses(
    { EMISOR_SIM_SPEI_JOURNAL: path.join(dir, "missing", "journal.jsonl") },
    /^EMISOR_SIM_SPEI_JOURNAL must be a file Emisor can create or append to \(ENOENT/,
  );
  refuses({ EMISOR_SIM_SPEI_JOURNAL: dir }, /^EMISOR_SIM_SPEI_JOURNAL .*EISDIR/);
  const journal = path.join(dir, "journal.jsonl");
  writeFileSync(journal, '{"e":"submit","key":"a"}\n');
  assert.equal(loadConfig({ EMISOR_SIM_SPEI_JOURNAL: journal }).speiSimJournal, journal);
  assert.equal(readFileSync(journal, "utf8"), '{"e":"submit","key":"a"}\n');
  const fresh = path.join(dir, "fresh.jsonl");
  assert.equal(loadConfig({ EMISOR_SIM_SPEI_JOURNAL: fresh }).speiSimJournal, fresh);
  assert.equal(readFileSync(fresh, "utf8"), "");
});

test("EMISOR_DATA_DIR must be a directory that can be created or written, when it is used", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "emisor-config-"));
  const file = path.join(dir, "file");
  writeFileSync(file, "");
  refuses(
    { EMISOR_DATA_DIR: file },
    /^EMISOR_DATA_DIR must be a directory Emisor can create or write to; .* is not a directory/,
  );
  refuses({ EMISOR_DATA_DIR: path.join(file, "data") }, /^EMISOR_DATA_DIR .*file is not a directory/);
  mkdirSync(path.join(dir, "existing"));
  assert.equal(
    loadConfig({ EMISOR_DATA_DIR: path.join(dir, "existing") }).dataDir,
    path.join(dir, "existing"),
  );
  assert.equal(loadConfig({ EMISOR_DATA_DIR: path.join(dir, "a", "b") }).dataDir, path.join(dir, "a", "b"));
  // Unused (PostgreSQL, and a master key given): not checked, so a read-only image can start.
  const key = "3f9c0a1b".repeat(8);
  const postgres = { DATABASE_URL: "postgres://db/emisor", EMISOR_MASTER_KEY: key, EMISOR_DATA_DIR: file };
  assert.equal(loadConfig(postgres).dataDir, file);
  refuses({ ...postgres, EMISOR_MASTER_KEY: "" }, /^EMISOR_DATA_DIR/);
});

test("EMISOR_MASTER_KEY and EMISOR_SPEI_WEBHOOK_SECRET are checked before anything opens", () => {
  refuses({ EMISOR_MASTER_KEY: "abc" }, /^EMISOR_MASTER_KEY must be 32 bytes, as 64 hex digits or Base64$/);
  refuses({ EMISOR_MASTER_KEY: " " }, /^EMISOR_MASTER_KEY/);
  const key = "3f9c0a1b".repeat(8);
  assert.equal(loadConfig({ EMISOR_MASTER_KEY: key }).masterKey, key);
  // A placeholder is not a key: every byte alike derives keys anyone can (audit: all zeros passed).
  for (const placeholder of ["0".repeat(64), "f".repeat(64), "A".repeat(43) + "="])
    refuses({ EMISOR_MASTER_KEY: placeholder }, /^EMISOR_MASTER_KEY is a placeholder/);
  // A blank secret is no secret; white space around one (a pasted line) fails every signature.
  for (const bad of [" ", "secret\n", " secret"])
    refuses(
      { EMISOR_SPEI_WEBHOOK_SECRET: bad },
      /^EMISOR_SPEI_WEBHOOK_SECRET must not be blank or begin or end with white space/,
    );
  assert.equal(
    loadConfig({ EMISOR_SPEI_WEBHOOK_SECRET: "s3cret with spaces" }).speiWebhookSecret,
    "s3cret with spaces",
  );
  assert.equal(loadConfig({ EMISOR_SPEI_WEBHOOK_SECRET: "" }).speiWebhookSecret, undefined);
});

test("numbers, switches and probabilities name their variable", () => {
  refuses({ PORT: "http" }, /^PORT must be a whole number, got "http"/);
  refuses({ PORT: "70000" }, /^PORT must be between 0 and 65535/);
  refuses({ EMISOR_DB_PREPARED_STATEMENTS: "-1" }, /^EMISOR_DB_PREPARED_STATEMENTS must be a whole number/);
  refuses({ EMISOR_WORKERS: "maybe" }, /^EMISOR_WORKERS must be true or false/);
  // Regression (audit): a delay at or above the provider call's timeout left every top-up PENDING.
  for (const slow of [String(limits.railCallTimeoutMs), "60000"])
    refuses(
      { EMISOR_SIM_AIRTIME_DELAY_MS: slow },
      new RegExp(
        `^EMISOR_SIM_AIRTIME_DELAY_MS must be below ${limits.railCallTimeoutMs} \\(the provider call's timeout`,
      ),
    );
  refuses({ EMISOR_SIM_AIRTIME_DELAY_MS: "-1" }, /^EMISOR_SIM_AIRTIME_DELAY_MS must be a whole number/);
  assert.equal(
    loadConfig({ EMISOR_SIM_AIRTIME_DELAY_MS: String(limits.railCallTimeoutMs - 1) }).airtimeSimDelayMs,
    limits.railCallTimeoutMs - 1,
  );
  refuses(
    { EMISOR_SIM_SPEI_RETURN_PROBABILITY: "50%" },
    /^EMISOR_SIM_SPEI_RETURN_PROBABILITY must be a number from 0 to 1/,
  );
  for (const [text, value] of [
    ["0.", 0],
    ["1.", 1],
    ["0.25", 0.25],
    [".5", 0.5],
    ["1.00", 1],
  ] as const)
    assert.equal(loadConfig({ EMISOR_SIM_SPEI_RETURN_PROBABILITY: text }).speiSimReturnProbability, value);
  for (const bad of ["1.5", "2", "-0.1", "0.5.1", "."])
    refuses({ EMISOR_SIM_SPEI_RETURN_PROBABILITY: bad }, /must be a number from 0 to 1/);
});
