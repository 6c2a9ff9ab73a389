// Proves the real process: a first start on an empty embedded database prints credentials and a
// curl line that work over a real socket, its webhook worker delivers, a second start creates
// nothing, SIGTERM exits cleanly.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync } from "node:fs";
import net, { type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { bannerOf } from "./helpers/banner.ts";
import { startReceiver, waitFor } from "./helpers/webhooks.ts";

function start(
  dataDir: string,
  masterKey: string,
  port = "0",
): { child: ChildProcess; output: Promise<string> } {
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    env: {
      ...process.env,
      DATABASE_URL: "",
      EMISOR_DATA_DIR: dataDir,
      PORT: port,
      EMISOR_MASTER_KEY: masterKey,
      LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output = bannerOf(child);
  return { child, output };
}

function stop(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    child.once("exit", (code) => resolve(code));
    child.kill("SIGTERM");
  });
}

test("first start prints working credentials; the second creates none; SIGTERM exits 0", async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "emisor-main-"));
  const masterKey = randomBytes(32).toString("hex");
  const first = start(dataDir, masterKey);
  const banner = await first.output;
  const apiKey = /api_key: +(\S+)/.exec(banner)?.[1];
  const password = /password: +(\S+)/.exec(banner)?.[1];
  const base = /listening on (http:\/\/\S+)/.exec(banner)?.[1];
  assert.ok(apiKey && password && base, banner);
  assert.match(banner, new RegExp(`curl -si -X POST ${base}/v1/auth/login`));
  const response = await fetch(`${base}/v1/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ api_client: { api_key: apiKey, password } }),
  });
  assert.equal(response.status, 200);
  assert.match(response.headers.get("authorization") ?? "", /^Bearer \S+$/);
  const body = (await response.json()) as { data: { client: { available: number } } };
  assert.equal(body.data.client.available, 1_000_000);
  await expectWebhookDelivered(base, response.headers.get("authorization") ?? "");
  assert.equal(await stop(first.child), 0);

  const second = start(dataDir, masterKey);
  const again = await second.output;
  assert.doesNotMatch(again, /password: +\S/);
  assert.match(again, /<api_key>/);
  assert.equal(await stop(second.child), 0);
});

test("a first start that cannot listen creates no sandbox tenant: the next start still prints its password", async () => {
  // Regression (third audit): the tenant was created before listen, so a start on a taken port
  // created it and exited, and its password, shown only by that start's banner, was lost.
  const dataDir = mkdtempSync(path.join(tmpdir(), "emisor-main-"));
  const masterKey = randomBytes(32).toString("hex");
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
  const { port } = taken.address() as AddressInfo;
  const failed = start(dataDir, masterKey, String(port));
  failed.output.catch(() => {});
  const code = await new Promise<number | null>((resolve) => failed.child.once("exit", resolve));
  await new Promise((resolve) => taken.close(resolve));
  assert.notEqual(code, 0);
  assert.match(
    await failed.output.catch((error: Error) => error.message),
    new RegExp(`emisor: PORT ${port} is already in use on 127\\.0\\.0\\.1: choose another PORT`),
  );
  const next = start(dataDir, masterKey);
  assert.match(await next.output, /password: +\S+/);
  assert.equal(await stop(next.child), 0);
});

test("a malformed setting stops the start with a message naming its variable, before anything opens", async () => {
  // Regression (operations audit): these came out of pino, pg or net naming no variable ("default
  // level:loud must be included in custom levels", "getaddrinfo ENOTFOUND base", "Invalid URL"),
  // and an unusable journal path was accepted until the simulator's first order.
  const dataDir = mkdtempSync(path.join(tmpdir(), "emisor-main-"));
  const cases: Array<[Record<string, string>, RegExp]> = [
    [
      { LOG_LEVEL: "loud" },
      /^emisor: LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent; got "loud"$/m,
    ],
    [
      { DATABASE_URL: "notaurl" },
      /^emisor: DATABASE_URL must be a PostgreSQL URL, postgres:\/\/user:password@host:5432\/database/m,
    ],
    [
      { DATABASE_URL: "postgres://u:hunter2@127.0.0.1:99999/x" },
      /^emisor: DATABASE_URL's port must be a number from 1 to 65535 \(special characters in the user name or password must be percent-encoded\)$/m,
    ],
    // Port 1 on the loopback: refused at once, wherever the tests run.
    [
      { DATABASE_URL: "postgres://u:hunter2@127.0.0.1:1/x" },
      /^emisor: could not connect to the PostgreSQL server of DATABASE_URL: connect ECONNREFUSED 127\.0\.0\.1:1$/m,
    ],
    [{ HOST: "bad host" }, /^emisor: HOST must be an IP address/m],
    [
      { EMISOR_SIM_SPEI_JOURNAL: path.join(dataDir, "missing", "journal.jsonl") },
      /^emisor: EMISOR_SIM_SPEI_JOURNAL must be a file Emisor can create or append to \(ENOENT/m,
    ],
  ];
  await Promise.all(
    cases.map(async ([env, message]) => {
      const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
        env: {
          ...process.env,
          DATABASE_URL: "",
          EMISOR_DATA_DIR: dataDir,
          PORT: "0",
          LOG_LEVEL: "warn",
          ...env,
        },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stderr = "";
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
      assert.equal(code, 1, `${JSON.stringify(env)}: ${stderr}`);
      assert.match(stderr, message);
      assert.doesNotMatch(stderr, /hunter2/);
    }),
  );
  // Each stopped before the database was opened: no lock, no key, no cluster was written.
  assert.deepEqual(readdirSync(dataDir), []);
});

/** The process runs the webhook worker (EMISOR_WORKERS defaults to true): a test event arrives. */
async function expectWebhookDelivered(base: string, authorization: string): Promise<void> {
  const receiver = await startReceiver();
  try {
    const post = (url: string, body: unknown) =>
      fetch(`${base}${url}`, {
        method: "POST",
        headers: { authorization, "content-type": "application/json" },
        body: JSON.stringify(body),
      }).then((r) => r.json() as Promise<{ data: { webhook: { id: string } } }>);
    const { webhook } = (await post("/v1/webhooks", { url: `${receiver.url}/main` })).data;
    await fetch(`${base}/v1/webhooks/${webhook.id}/test`, { method: "POST", headers: { authorization } });
    await waitFor("the test event", () => receiver.receipts.length === 1, 30_000);
    assert.equal(JSON.parse(receiver.receipts[0]?.body ?? "{}").type, "webhook.test");
  } finally {
    await receiver.close();
  }
}
