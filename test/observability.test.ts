// Proves what an operator sees: the access line of every request, X-Request-Id on every answer.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { WebhookWorker } from "../src/modules/webhooks/worker.ts";
import { call, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { createCardholder } from "./helpers/cards.ts";
import { ownLogs, startTestApp, type TestApp } from "./helpers/harness.ts";
import { postCardMessage } from "./helpers/rails.ts";
import { fastTiming, startReceiver, waitFor } from "./helpers/webhooks.ts";

let t: TestApp;
let tenant: Tenant;
before(async () => {
  t = await startTestApp({ cardNetworkSecret: "network-secret-observability" });
  tenant = await createTenant(t, { available: 1000 });
});
after(() => t.close());

async function scrape(): Promise<string> {
  const answer = await t.app.inject({ method: "GET", url: "/metrics" });
  assert.equal(answer.statusCode, 200);
  return answer.body;
}

/** The value of one series of a scrape (`name{labels}` as written), or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

// First in the file: the backlogs are read once per 5 s, and no scrape came before this one.
test("/metrics shows the backlogs: webhook deliveries pending and their age, the SPEI outbox, airtime", async () => {
  expectOk(
    await call(t.app, "POST", "/v1/webhooks", {
      token: tenant.token,
      body: { url: "http://localhost:9/hook" },
    }),
  );
  await createCardholder(t, tenant);
  // No worker runs in this app: the delivery waits.
  await new Promise((resolve) => setTimeout(resolve, 1100));
  const text = await scrape();
  assert.ok((sample(text, "emisor_webhook_deliveries_pending") ?? 0) >= 1);
  assert.ok((sample(text, "emisor_webhook_oldest_pending_seconds") ?? 0) >= 1);
  for (const empty of [
    "emisor_spei_outbox_jobs",
    "emisor_spei_outbox_oldest_seconds",
    "emisor_airtime_topups_pending",
    "emisor_airtime_oldest_pending_seconds",
  ])
    assert.equal(sample(text, empty), 0, empty);
});

test("/metrics counts webhook delivery attempts by outcome", async () => {
  const receiver = await startReceiver();
  expectOk(await call(t.app, "POST", "/v1/webhooks", { token: tenant.token, body: { url: receiver.url } }));
  await createCardholder(t, tenant);
  const worker = new WebhookWorker({
    db: t.ctx.db,
    vaultKey: t.ctx.keys.vault,
    log: t.app.log,
    sandbox: true,
    timing: { ...fastTiming, backoffBaseMs: 60_000 },
    attempts: t.ctx.webhookAttempts,
  }).start();
  try {
    // One endpoint answers 204; the first test's (port 9) refuses the connection.
    await waitFor("both outcomes", async () => {
      const text = await scrape();
      const delivered = sample(text, 'emisor_webhook_delivery_attempts_total{outcome="delivered"}') ?? 0;
      const retrying = sample(text, 'emisor_webhook_delivery_attempts_total{outcome="retrying"}') ?? 0;
      return delivered >= 1 && retrying >= 1;
    });
  } finally {
    await worker.stop();
    await receiver.close();
  }
  const text = await scrape();
  assert.equal(sample(text, 'emisor_webhook_delivery_attempts_total{outcome="failed"}'), 0);
});

test("/metrics counts answers by envelope code, 429s by limit and authorizations by result and reason", async () => {
  expectOk(await call(t.app, "GET", "/v1/catalogs/gender", { token: tenant.token }));
  const before = await scrape();
  const answersOk = sample(before, 'emisor_http_answers_total{code="0"}') ?? 0;
  assert.ok(answersOk >= 1);
  assert.equal(sample(before, 'emisor_http_rate_limited_total{limit="login_key"}'), 0);
  // An API key id nobody has, locked after its failed logins: the next attempt is a 429.
  const apiKey = `ek_${randomUUID().replaceAll("-", "")}`;
  for (;;) {
    const answer = await call(t.app, "POST", "/v1/auth/login", {
      body: { api_client: { api_key: apiKey, password: "not-the-password" } },
    });
    if (answer.status === 429) break;
  }
  const declined = await postCardMessage(t, {
    type: "AUTHORIZATION",
    card_id: randomUUID(),
    amount: 100,
    merchant: { name: "OXXO INSURGENTES", city: "CDMX", country: "MEX", mcc: "5411", acceptor_id: "T1" },
    channel: "POS_CHIP",
  });
  assert.equal((expectOk(declined) as { result: string }).result, "DECLINED");
  const after = await scrape();
  assert.equal(sample(after, 'emisor_http_answers_total{code="0"}'), answersOk + 1);
  assert.ok((sample(after, 'emisor_http_answers_total{code="2005"}') ?? 0) >= 1);
  assert.equal(sample(after, 'emisor_http_rate_limited_total{limit="login_key"}'), 1);
  assert.equal(sample(after, 'emisor_http_answers_total{code="2008"}'), 1);
  assert.equal(
    sample(after, 'emisor_authorization_decisions_total{result="DECLINED",reason="UNKNOWN_CARD"}'),
    1,
  );
  // The decision call's histogram of main is there, once.
  assert.equal(after.match(/^# TYPE emisor_authorization_decision_call_seconds histogram$/gm)?.length, 1);
});

interface AccessLine {
  msg: string;
  level: number;
  reqId: string;
  method: string;
  route: string;
  status: number;
  code: number | null;
  ms: number;
  client: string | null;
  apiKey: string | null;
}

function accessLines(): AccessLine[] {
  return ownLogs()
    .split("\n")
    .filter((line) => line.includes('"msg":"request"'))
    .map((line) => JSON.parse(line) as AccessLine);
}

function accessLineOf(reqId: string): AccessLine {
  const found = accessLines().filter((line) => line.reqId === reqId);
  assert.equal(found.length, 1, `one access line for ${reqId}, found ${found.length}`);
  return found[0] as AccessLine;
}

test("every request writes one access line at info: route template, status, code, time, caller", async () => {
  const missing = "00000000-0000-4000-8000-000000000000";
  const answer = await call(t.app, "GET", `/v1/cards/${missing}`, {
    token: tenant.token,
    headers: { "x-request-id": "access-1" },
  });
  expectError(answer, 3302, 404);
  const line = accessLineOf("access-1");
  assert.equal(line.level, 30);
  assert.equal(line.method, "GET");
  assert.equal(line.route, "/v1/cards/:id");
  assert.equal(line.status, 404);
  assert.equal(line.code, 3302);
  assert.ok(line.ms >= 0 && line.ms < 10_000);
  assert.equal(line.client, tenant.clientId);
  assert.equal(line.apiKey, tenant.apiKeyId);

  expectOk(
    await call(t.app, "GET", "/v1/catalogs/gender", {
      token: tenant.token,
      headers: { "x-request-id": "access-2" },
    }),
  );
  assert.equal(accessLineOf("access-2").code, 0);
  // Anonymous and unmatched requests are logged too, with no caller.
  await call(t.app, "GET", "/nothing/here", { headers: { "x-request-id": "access-3" } });
  const unmatched = accessLineOf("access-3");
  assert.deepEqual(
    [unmatched.route, unmatched.status, unmatched.code, unmatched.client],
    ["unmatched", 404, 3000, null],
  );
  await call(t.app, "GET", "/v1/catalogs/gender", { token: "nope", headers: { "x-request-id": "access-4" } });
  assert.deepEqual([accessLineOf("access-4").status, accessLineOf("access-4").code], [401, 2002]);
});

test("an access line never carries the query string, the body or the token", async () => {
  await call(t.app, "POST", "/v1/auth/login", {
    body: { api_client: { api_key: tenant.apiKey, password: "wrong-password-zzz" } },
    headers: { "x-request-id": "access-login" },
  });
  await call(t.app, "GET", "/v1/cardholders?email=secret.person%40example.mx", {
    token: tenant.token,
    headers: { "x-request-id": "access-query" },
  });
  const lines = accessLines().filter((line) => line.reqId.startsWith("access-"));
  const text = JSON.stringify(lines);
  for (const secret of ["wrong-password-zzz", "secret.person", tenant.token, "?"])
    assert.ok(!text.includes(secret), `${secret} reached an access line`);
  assert.equal(accessLineOf("access-login").route, "/v1/auth/login");
});

test("X-Request-Id: a sane one is echoed, another is replaced by one Emisor makes, on every answer", async () => {
  const sane = await call(t.app, "GET", "/health", { headers: { "x-request-id": "trace-abc.123" } });
  assert.equal(sane.headers["x-request-id"], "trace-abc.123");
  const made = await call(t.app, "GET", "/v1/catalogs/gender", { token: tenant.token });
  const id = String(made.headers["x-request-id"]);
  assert.match(id, /^req-[0-9a-f]{8}-[0-9a-z]+$/);
  accessLineOf(id);
  for (const bad of ["x".repeat(129), "has space", "tab\there", "ñandú"]) {
    const answer = await call(t.app, "GET", "/health", { headers: { "x-request-id": bad } });
    assert.match(String(answer.headers["x-request-id"]), /^req-/, `${bad} was echoed`);
  }
  // Answers refused before any route ran carry it too: a bad token, an unknown route, a URL the
  // router cannot decode, a body that is not JSON.
  const refused = [
    await call(t.app, "GET", "/v1/catalogs/gender", { headers: { "x-request-id": "r-401" } }),
    await call(t.app, "GET", "/v1/nowhere", { headers: { "x-request-id": "r-404" } }),
    await call(t.app, "GET", "/v1/cards/%c0%ae", {
      token: tenant.token,
      headers: { "x-request-id": "r-bad-url" },
    }),
    await call(t.app, "POST", "/v1/cardholders", {
      token: tenant.token,
      raw: "{not json",
      headers: { "x-request-id": "r-json" },
    }),
  ];
  assert.deepEqual(
    refused.map((answer) => [answer.status, answer.headers["x-request-id"]]),
    [
      [401, "r-401"],
      [404, "r-404"],
      [400, "r-bad-url"],
      [400, "r-json"],
    ],
  );
});
