// Proves `emisor tenant create --json` prints exactly one JSON object whose credentials log in,
// funded through a balanced ledger entry, and that `emisor migrate` is idempotent.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { checkInvariants } from "../src/ledger/ledger.ts";
import { limits } from "../src/limits.ts";
import { call, createTenant, expectError, expectOk, login } from "./helpers/api.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";

const run = promisify(execFile);
let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

/** Runs the CLI against this file's PostgreSQL database, or a fresh embedded one. */
async function emisor(args: string[], dataDir: string, extra: Record<string, string> = {}) {
  const env = {
    ...process.env,
    EMISOR_MASTER_KEY: t.config.masterKey,
    EMISOR_DATA_DIR: dataDir,
    ...(t.databaseUrl ? { DATABASE_URL: t.databaseUrl } : { DATABASE_URL: "" }),
    ...extra,
  };
  return run(process.execPath, ["bin/emisor.js", ...args], { env, timeout: 60_000 });
}

test("tenant create --json prints one JSON object; the credentials log in; the ledger balances", async (s) => {
  if (!t.databaseUrl) {
    s.skip("the embedded engine is covered by the next test");
    return;
  }
  const { stdout } = await emisor(
    ["tenant", "create", "--name", "Acme SA", "--available", "1000.00", "--json"],
    "x",
  );
  const lines = stdout.trim().split("\n");
  assert.equal(lines.length, 1);
  const output = JSON.parse(lines[0] ?? "") as Record<string, unknown>;
  for (const key of ["client_id", "api_key", "password"]) assert.equal(typeof output[key], "string");
  assert.equal(output.available, 1000);
  assert.equal(output.alias, "ACMESA");
  const token = await login(t.app, String(output.api_key), String(output.password));
  const response = await call<{ client: { available: number; id: string } }>(
    t.app,
    "POST",
    "/v1/auth/login",
    {
      body: { api_client: { api_key: output.api_key, password: output.password } },
    },
  );
  assert.equal(expectOk(response).client.available, 1000);
  assert.equal(expectOk(response).client.id, output.client_id);
  assert.ok(token.length > 20);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("on the embedded engine: migrate, then tenant create, in a new data directory", async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "emisor-cli-"));
  const env = ["--name", "Embedded Co", "--alias", "EMB", "--json"];
  if (t.databaseUrl) {
    // Against PostgreSQL the embedded engine is still what `npm start` uses by default.
    const { stderr } = await run(process.execPath, ["bin/emisor.js", "migrate"], {
      env: { ...process.env, DATABASE_URL: "", EMISOR_DATA_DIR: dataDir },
      timeout: 60_000,
    });
    assert.match(stderr, /applied: 0001_foundation/);
    return;
  }
  const first = await emisor(["migrate"], dataDir);
  assert.match(first.stderr, /applied: 0001_foundation/);
  const second = await emisor(["migrate"], dataDir);
  assert.match(second.stderr, /nothing to apply/);
  const { stdout } = await emisor(["tenant", "create", ...env], dataDir);
  const output = JSON.parse(stdout) as Record<string, unknown>;
  assert.equal(output.alias, "EMB");
  assert.equal(output.available, 0);
});

test("key unlock lifts a key's login lock, which anyone knowing the key id can set", async (s) => {
  if (!t.databaseUrl) {
    s.skip("the CLI shares a running service's database on PostgreSQL only (the embedded one is locked)");
    return;
  }
  const tenant = await createTenant(t);
  const attempt = (password: string) =>
    call(t.app, "POST", "/v1/auth/login", { body: { api_client: { api_key: tenant.apiKey, password } } });
  for (let i = 0; i < limits.loginFailuresPerKeyMax; i++) await attempt("not the password");
  expectError(await attempt(tenant.password), 2008, 429);
  const { stderr } = await emisor(["key", "unlock", "--api-key", tenant.apiKey], "x");
  assert.match(stderr, /failed logins forgotten/);
  expectOk(await attempt(tenant.password));
  const again = await emisor(["key", "unlock", "--api-key", tenant.apiKey], "x");
  assert.match(again.stderr, /nothing to unlock/);
});

test("--name and --alias bounds count characters as the API does, not UTF-16 units", async (s) => {
  if (!t.databaseUrl) {
    s.skip("the CLI shares this file's database on PostgreSQL only (the embedded one is locked)");
    return;
  }
  // Regression (audit): six emoji (twelve UTF-16 units) were "--alias must be 3-10 characters",
  // and two (four units) were taken for an alias of at least 3.
  const name = "😀".repeat(60);
  const { stdout } = await emisor(
    ["tenant", "create", "--name", name, "--alias", "😀".repeat(10), "--json"],
    "x",
  );
  const output = JSON.parse(stdout) as Record<string, unknown>;
  assert.equal(output.name, name);
  assert.equal(output.alias, "😀".repeat(10));
  await assert.rejects(
    emisor(["tenant", "create", "--name", "Acme", "--alias", "😀😀"], "x"),
    /--alias must be 3-10 characters/,
  );
  await assert.rejects(
    emisor(["tenant", "create", "--name", "Acme", "--alias", "😀".repeat(11)], "x"),
    /--alias must be 3-10 characters/,
  );
  await assert.rejects(
    emisor(["tenant", "create", "--name", "😀".repeat(61)], "x"),
    /--name is required \(1-60 characters\)/,
  );
});

test("bad arguments fail with a message and a non-zero exit", async () => {
  await assert.rejects(emisor(["tenant", "create", "--available", "10"], "x"), /--name is required/);
  await assert.rejects(
    emisor(["tenant", "create", "--name", "X Co", "--available", "1.005"], "x"),
    /at most 2 decimals/,
  );
  await assert.rejects(emisor(["frobnicate"], "x"), /unknown command/);
  // Regression (HTTP audit): text the API refuses, and money from the sandbox's funding account
  // outside the sandbox, were accepted.
  await assert.rejects(emisor(["tenant", "create", "--name", "   "], "x"), /--name must not be blank/);
  await assert.rejects(
    emisor(["tenant", "create", "--name", "Acme", "--alias", "AB\tC"], "x"),
    /--alias must not contain control characters/,
  );
  await assert.rejects(
    emisor(["tenant", "create", "--name", "Prod Co", "--available", "10"], "x", { EMISOR_SANDBOX: "false" }),
    /only with EMISOR_SANDBOX=true/,
  );
});
