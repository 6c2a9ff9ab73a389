// Proves the admin port: /metrics, /docs, /openapi.json, /health and /ready there, the first three
// off the public port; and that a graceful shutdown logs what it waited for and how long.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { loadConfig } from "../src/config.ts";
import { buildAdminApp } from "../src/http/admin.ts";
import { call, createTenant } from "./helpers/api.ts";
import { bannerOf } from "./helpers/banner.ts";
import { freshDatabase, startTestApp } from "./helpers/harness.ts";

test("with an admin port, the public port serves the API, /health and /ready; the admin port the rest", async () => {
  const t = await startTestApp({ adminPort: 0 });
  const admin = await buildAdminApp({
    publicApp: t.app,
    registry: t.app.metricsRegistry,
    database: t.database,
  });
  try {
    const tenant = await createTenant(t);
    for (const url of ["/metrics", "/openapi.json", "/docs", "/docs/static/index.html"]) {
      const answer = await call(t.app, "GET", url);
      assert.equal(answer.status, 404, url);
      assert.equal(answer.body.code, 3000, url);
    }
    for (const url of ["/health", "/ready"]) assert.equal((await call(t.app, "GET", url)).status, 200, url);
    assert.equal((await call(t.app, "GET", "/v1/catalogs/gender", { token: tenant.token })).status, 200);

    const metrics = await admin.inject({ method: "GET", url: "/metrics" });
    assert.equal(metrics.statusCode, 200);
    // The public app's requests are what it counts.
    assert.match(
      metrics.body,
      /emisor_http_requests_total\{method="GET",route="\/v1\/catalogs\/gender",status="200"\} 1/,
    );
    const document = (await admin.inject({ method: "GET", url: "/openapi.json" })).json() as {
      openapi: string;
      paths: Record<string, unknown>;
    };
    assert.match(document.openapi, /^3\.1/);
    assert.ok(document.paths["/v1/cards/payment"]);
    const docs = await admin.inject({ method: "GET", url: "/docs" });
    assert.equal(docs.statusCode, 200);
    assert.match(docs.body, /swagger/i);
    assert.equal((await admin.inject({ method: "GET", url: "/docs/static/swagger-ui.css" })).statusCode, 200);
    for (const url of ["/health", "/ready"]) assert.equal((await admin.inject({ url })).statusCode, 200, url);
    assert.equal((await admin.inject({ url: "/v1/catalogs/gender" })).statusCode, 404);
  } finally {
    await admin.close();
    await t.close();
  }
});

test("EMISOR_ADMIN_PORT is checked at start", () => {
  assert.equal(loadConfig({}).adminPort, undefined);
  assert.equal(loadConfig({ EMISOR_ADMIN_PORT: "9100" }).adminPort, 9100);
  assert.equal(loadConfig({ HOST: "0.0.0.0" }).adminHost, "0.0.0.0");
  assert.equal(loadConfig({ HOST: "0.0.0.0", EMISOR_ADMIN_HOST: "127.0.0.1" }).adminHost, "127.0.0.1");
  assert.throws(
    () => loadConfig({ PORT: "3000", EMISOR_ADMIN_PORT: "3000" }),
    /EMISOR_ADMIN_PORT must differ/,
  );
  assert.throws(() => loadConfig({ EMISOR_ADMIN_PORT: "http" }), /EMISOR_ADMIN_PORT must be a whole number/);
  assert.throws(() => loadConfig({ EMISOR_ADMIN_HOST: "a b" }), /EMISOR_ADMIN_HOST must be an IP address/);
});

/** The process's JSON log lines with `msg`. */
function logLines(output: string, msg: string): Record<string, unknown>[] {
  return output
    .split("\n")
    .filter((line) => line.startsWith("{") && line.includes(`"msg":"${msg}"`))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

test("the real process listens on both ports, and its shutdown logs each wait and the total", async () => {
  const fresh = process.env.DATABASE_URL ? await freshDatabase() : undefined;
  await fresh?.database.close();
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    env: {
      ...process.env,
      DATABASE_URL: fresh?.url ?? "",
      EMISOR_DATA_DIR: mkdtempSync(path.join(tmpdir(), "emisor-admin-")),
      EMISOR_MASTER_KEY: randomBytes(32).toString("hex"),
      PORT: "0",
      EMISOR_ADMIN_PORT: "0",
      LOG_LEVEL: "info",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  try {
    const banner = await bannerOf(child);
    const base = /listening on (http:\/\/\S+)/.exec(banner)?.[1];
    const adminBase = /Admin port .* on (http:\/\/\S+)/.exec(banner)?.[1];
    assert.ok(base && adminBase && base !== adminBase, banner);
    assert.equal((await fetch(`${base}/metrics`)).status, 404);
    const health = await fetch(`${base}/health`, { headers: { "x-request-id": "probe-1" } });
    assert.equal(health.headers.get("x-request-id"), "probe-1");
    const metrics = await fetch(`${adminBase}/metrics`);
    assert.equal(metrics.status, 200);
    assert.match(
      await metrics.text(),
      /^emisor_http_requests_total\{method="GET",route="\/health",status="200"\} 1$/m,
    );
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    assert.equal(await exited, 0);
    const steps = logLines(output, "shutdown waited");
    assert.deepEqual(
      steps.map((line) => line.step),
      ["requests and worker passes", "webhook worker", "admin port", "database"],
    );
    assert.equal(steps[0]?.requestsInFlight, 0);
    for (const line of steps) assert.equal(typeof line.ms, "number");
    assert.equal(typeof logLines(output, "shutdown complete")[0]?.ms, "number");
    // The access line of the probe, with its request id.
    assert.equal(logLines(output, "request").find((line) => line.reqId === "probe-1")?.route, "/health");
  } finally {
    child.kill("SIGKILL");
    await fresh?.drop();
  }
});
