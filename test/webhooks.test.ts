// Proves the /v1/webhooks API: endpoints with a secret shown once and stored sealed, URL rules per mode,
// subscriptions, bounds, state, enable/rotate/test/replay, and tenancy (another client's endpoint is 404).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { open } from "../src/crypto/vault.ts";
import { limits } from "../src/limits.ts";
import { disableEndpoint } from "../src/modules/webhooks/repository.ts";
import type { DeliveryView, WebhookView } from "../src/modules/webhooks/service.ts";
import { secretContext } from "../src/modules/webhooks/signature.ts";
import { call, createSubClient, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { emit } from "./helpers/webhooks.ts";

let t: TestApp;
let tenant: Tenant;
before(async () => {
  t = await startTestApp();
  tenant = await createTenant(t);
});
after(() => t.close());

type Webhook = WebhookView;
type Delivery = DeliveryView;
type Created = { webhook: Webhook & { secret: string | null } };
type State = { webhook: Webhook; recent_deliveries: Delivery[] };

const webhookKeys = [
  "client_id",
  "created_at",
  "description",
  "disabled_at",
  "disabled_reason",
  "event_types",
  "failure_streak",
  "id",
  "include_subclients",
  "last_error",
  "last_failure_at",
  "last_success_at",
  "status",
  "updated_at",
  "url",
];

const create = (
  token: string,
  body: Record<string, unknown>,
  headers?: Record<string, string>,
  app = t.app,
) => call<Created>(app, "POST", "/v1/webhooks", { token, body, ...(headers ? { headers } : {}) });
const state = (token: string, id: string) => call<State>(t.app, "GET", `/v1/webhooks/${id}`, { token });

function expectUrlRejected(response: Awaited<ReturnType<typeof create>>, message: RegExp): void {
  expectError(response, 1000, 400);
  const details = (response.body.data as unknown as { details: { field: string; message: string }[] })
    .details;
  assert.equal(details[0]?.field, "url");
  assert.match(details[0]?.message ?? "", message);
}

test("create: exact shape, a whsec_ secret shown once and stored sealed, never in GET or list", async () => {
  const response = await create(tenant.token, {
    url: "https://hooks.example.com/emisor?source=emisor",
    event_types: ["card.payment", "transfer.in.received"],
    description: "Pagos",
  });
  const created = expectOk(response);
  // Regression (HTTP audit): the answer holding the signing secret may not be kept by a cache.
  assert.equal(response.headers["cache-control"], "no-store");
  const { secret, ...webhook } = created.webhook;
  assert.deepEqual(Object.keys(webhook).sort(), webhookKeys);
  assert.match(secret ?? "", /^whsec_[A-Za-z0-9+/]{43}=$/);
  assert.equal(Buffer.from((secret ?? "").slice(6), "base64").length, limits.webhookSecretBytes);
  assert.deepEqual(
    { ...webhook, id: "", created_at: "", updated_at: "" },
    {
      id: "",
      client_id: tenant.clientId,
      url: "https://hooks.example.com/emisor?source=emisor",
      description: "Pagos",
      event_types: ["card.payment", "transfer.in.received"],
      include_subclients: false,
      status: "ENABLED",
      disabled_reason: null,
      disabled_at: null,
      failure_streak: 0,
      last_success_at: null,
      last_failure_at: null,
      last_error: null,
      created_at: "",
      updated_at: "",
    },
  );
  const row = await t.ctx.db
    .selectFrom("webhook_endpoints")
    .selectAll()
    .where("id", "=", webhook.id)
    .executeTakeFirstOrThrow();
  assert.ok(secret && !JSON.stringify(row).includes(secret.slice(6)), "the secret is stored in clear");
  assert.equal(open(t.ctx.keys.vault, row.secret_sealed, secretContext(webhook.id)), secret);
  assert.throws(() => open(t.ctx.keys.vault, row.secret_sealed, secretContext(tenant.clientId)));

  const one = expectOk(await state(tenant.token, webhook.id));
  assert.deepEqual(one, { webhook, recent_deliveries: [] });
  const listed = await call<{ webhooks: Webhook[] }>(t.app, "GET", "/v1/webhooks", { token: tenant.token });
  assert.ok(expectOk(listed).webhooks.some((w) => w.id === webhook.id));
  for (const response of [one, listed.body]) assert.ok(!JSON.stringify(response).includes(secret.slice(6)));
});

test(`defaults: every type (["*"]), own events only; the same Idempotency-Key replays without the secret`, async () => {
  const owner = await createTenant(t);
  const first = await create(owner.token, { url: "https://example.com/a" }, { "idempotency-key": "hook-1" });
  const created = expectOk(first).webhook;
  assert.deepEqual([created.event_types, created.include_subclients], [["*"], false]);
  assert.ok(created.secret);
  const again = await create(owner.token, { url: "https://example.com/a" }, { "idempotency-key": "hook-1" });
  assert.equal(again.headers["idempotent-replayed"], "true");
  assert.deepEqual(expectOk(again).webhook, { ...created, secret: null });
  expectError(
    await create(owner.token, { url: "https://example.com/b" }, { "idempotency-key": "hook-1" }),
    4001,
    409,
  );
  const stored = await t.ctx.db.selectFrom("idempotency_keys").select("response_body").execute();
  assert.ok(!JSON.stringify(stored).includes(created.secret.slice(6)), "a replay stored the secret in clear");
  const listed = expectOk(
    await call<{ total: number }>(t.app, "GET", "/v1/webhooks", { token: owner.token }),
  );
  assert.equal(listed.total, 1);
});

test("URLs in sandbox: https to public hosts, http or https only to localhost or 127.0.0.1 on any port", async () => {
  for (const url of [
    "https://hooks.example.com/x",
    "http://localhost:8080/hook",
    "http://127.0.0.1:1/hook",
    "http://localhost/hook",
  ]) {
    expectOk(await create(tenant.token, { url }));
  }
  const again = await createTenant(t);
  for (const [url, message] of [
    ["http://hooks.example.com/x", /https \(or http:\/\/localhost/],
    ["http://10.0.0.1/x", /https/],
    ["ftp://localhost/x", /https/],
    ["not a url", /absolute URL/],
    ["/relative/path", /absolute URL/],
    ["http://user:pw@localhost/x", /credentials/],
    // Regression (contract audit): sandbox skipped the private-address check for https.
    ["https://169.254.169.254/latest", /local or private/],
    ["https://10.0.0.1/x", /local or private/],
    ["https://0.0.0.0/", /local or private/],
    ["https://[::1]/x", /local or private/],
  ] as const) {
    expectUrlRejected(await create(again.token, { url }), message);
  }
});

test("URLs outside sandbox: https only, never localhost or a private address", async () => {
  const production = await startTestApp({ sandbox: false });
  try {
    const owner = await createTenant(production);
    for (const url of [
      "http://localhost:3000/hook",
      "http://127.0.0.1:3000/hook",
      "http://hooks.example.com/hook",
    ]) {
      expectUrlRejected(await create(owner.token, { url }, undefined, production.app), /^must be https$/);
    }
    for (const url of [
      "https://localhost/hook",
      "https://api.localhost/hook",
      "https://127.0.0.1/hook",
      "https://2130706433/hook",
      "https://10.1.2.3/hook",
      "https://172.20.0.1/hook",
      "https://192.168.1.10/hook",
      "https://169.254.169.254/latest",
      "https://0.0.0.0/hook",
      "https://[::1]/hook",
      "https://[::ffff:127.0.0.1]/hook",
      "https://[fd00::1]/hook",
      // Regression (audit): these were accepted.
      "https://localhost./hook",
      "https://[::7f00:1]/hook",
      "https://[fec0::1]/hook",
      "https://[ff02::1]/hook",
      "https://[64:ff9b::7f00:1]/hook",
      "https://198.18.0.1/hook",
      "https://224.0.0.1/hook",
      "https://255.255.255.255/hook",
      // Regression (third audit): 6to4 and Teredo carry an IPv4 address (169.254.169.254 here).
      "https://[2002:a9fe:a9fe::]/hook",
      "https://[2001::a9fe:a9fe]/hook",
    ]) {
      expectUrlRejected(await create(owner.token, { url }, undefined, production.app), /local or private/);
    }
    const ok = expectOk(
      await create(owner.token, { url: "https://hooks.example.com/hook" }, undefined, production.app),
    );
    assert.equal(ok.webhook.url, "https://hooks.example.com/hook");
  } finally {
    await production.close();
  }
});

test(`subscriptions: known types only, unique, and "*" alone`, async () => {
  const owner = await createTenant(t);
  const rejected: [unknown, string, string][] = [
    [["card.unknown"], "event_types.0", "enum"],
    [[], "event_types", "minItems"],
    [["card.payment", "card.payment"], "event_types", "uniqueItems"],
    [["*", "card.payment"], "event_types", "x-all"],
    ["card.payment", "event_types", "type"],
  ];
  for (const [eventTypes, field, rule] of rejected) {
    const response = expectError(
      await create(owner.token, { url: "https://example.com/x", event_types: eventTypes }),
      1000,
      400,
    );
    const details = (response.body.data as unknown as { details: { field: string; rule: string }[] }).details;
    assert.ok(
      details.some((d) => d.field === field && d.rule === rule),
      `${JSON.stringify(eventTypes)}: ${JSON.stringify(details)}`,
    );
  }
  expectError(await create(owner.token, { url: "https://example.com/x", secret: "mine" }), 1000, 400);
  const all = expectOk(await create(owner.token, { url: "https://example.com/x", event_types: ["*"] }));
  assert.deepEqual(all.webhook.event_types, ["*"]);
});

test(`a client has at most ${limits.webhookEndpointsPerClientMax} endpoints (5701); deleting one frees a place`, async () => {
  const owner = await createTenant(t);
  const ids: string[] = [];
  for (let i = 0; i < limits.webhookEndpointsPerClientMax; i++) {
    ids.push(expectOk(await create(owner.token, { url: `https://example.com/${i}` })).webhook.id);
  }
  expectError(await create(owner.token, { url: "https://example.com/one-more" }), 5701, 422);
  const list = expectOk(
    await call<{ webhooks: Webhook[]; page: number; pages: number; total: number }>(
      t.app,
      "GET",
      "/v1/webhooks?per_page=8&page=3",
      { token: owner.token },
    ),
  );
  assert.deepEqual(
    [list.page, list.pages, list.total, list.webhooks.map((w) => w.id)],
    [3, 3, limits.webhookEndpointsPerClientMax, ids.slice(16)],
  );
  const deleted = expectOk(await call(t.app, "DELETE", `/v1/webhooks/${ids[0]}`, { token: owner.token }));
  assert.deepEqual(deleted, { webhook: { id: ids[0], deleted: true } });
  expectError(await state(owner.token, ids[0] ?? ""), 3701, 404);
  expectError(await call(t.app, "DELETE", `/v1/webhooks/${ids[0]}`, { token: owner.token }), 3701, 404);
  expectOk(await create(owner.token, { url: "https://example.com/one-more" }));
});

test("tenancy: another client's endpoint is 3701 everywhere; a parent manages its sub-clients' endpoints", async () => {
  const owner = await createTenant(t);
  const stranger = await createTenant(t);
  const sub = await createSubClient(t, owner);
  const hook = expectOk(await create(owner.token, { url: "https://example.com/mine" })).webhook;
  const [event] = await emit(t, [{ type: "card.payment", clientId: owner.clientId }]);
  const attempts: [string, string, unknown][] = [
    ["GET", `/v1/webhooks/${hook.id}`, undefined],
    ["DELETE", `/v1/webhooks/${hook.id}`, undefined],
    ["POST", `/v1/webhooks/${hook.id}/enable`, undefined],
    ["POST", `/v1/webhooks/${hook.id}/rotate_secret`, undefined],
    ["POST", `/v1/webhooks/${hook.id}/test`, undefined],
    ["POST", `/v1/webhooks/${hook.id}/replay`, { event_id: event }],
    ["GET", "/v1/webhooks/00000000-0000-4000-8000-000000000000", undefined],
  ];
  for (const token of [stranger.token, sub.token ?? ""]) {
    for (const [method, url, body] of attempts) {
      expectError(await call(t.app, method as "GET", url, { token, body }), 3701, 404);
    }
  }
  assert.equal(
    expectOk(await call<{ total: number }>(t.app, "GET", "/v1/webhooks", { token: stranger.token })).total,
    0,
  );
  expectError(
    await create(stranger.token, { url: "https://example.com/x", client_id: owner.clientId }),
    3101,
    404,
  );
  expectError(
    await call(t.app, "GET", `/v1/webhooks?client_id=${owner.clientId}`, { token: stranger.token }),
    3101,
    404,
  );

  const forSub = expectOk(
    await create(owner.token, { url: "https://example.com/sub", client_id: sub.clientId }),
  );
  assert.equal(forSub.webhook.client_id, sub.clientId);
  const subList = expectOk(
    await call<{ webhooks: Webhook[] }>(t.app, "GET", "/v1/webhooks", { token: sub.token ?? "" }),
  ).webhooks;
  assert.deepEqual(
    subList.map((w) => w.id),
    [forSub.webhook.id],
  );
  const ownerList = expectOk(
    await call<{ webhooks: Webhook[] }>(t.app, "GET", `/v1/webhooks?client_id=${sub.clientId}`, {
      token: owner.token,
    }),
  ).webhooks;
  assert.deepEqual(
    ownerList.map((w) => w.id),
    [forSub.webhook.id],
  );
  expectOk(await state(sub.token ?? "", forSub.webhook.id));
});

test("test and replay queue deliveries; replay is limited to events the endpoint's owner may see", async () => {
  const owner = await createTenant(t);
  const stranger = await createTenant(t);
  const sub = await createSubClient(t, owner);
  const hook = expectOk(await create(owner.token, { url: "https://example.com/hook" })).webhook;
  const subHook = expectOk(
    await create(owner.token, { url: "https://example.com/sub", client_id: sub.clientId }),
  ).webhook;

  const tested = expectOk(
    await call<{ event: Record<string, unknown>; delivery: Delivery }>(
      t.app,
      "POST",
      `/v1/webhooks/${hook.id}/test`,
      {
        token: owner.token,
      },
    ),
  );
  assert.deepEqual(
    { ...tested.event, id: "", created_at: "" },
    {
      id: "",
      type: "webhook.test",
      created_at: "",
      client_id: owner.clientId,
      data: { webhook: { id: hook.id, url: hook.url }, message: "A test event sent on request" },
    },
  );
  assert.deepEqual(
    { ...tested.delivery, id: "", created_at: "", next_attempt_at: "" },
    {
      id: "",
      event_id: tested.event.id,
      event_type: "webhook.test",
      kind: "TEST",
      status: "PENDING",
      attempts: 0,
      next_attempt_at: "",
      last_attempt_at: null,
      last_status_code: null,
      last_error: null,
      delivered_at: null,
      created_at: "",
    },
  );
  const listed = expectOk(
    await call<{ events: { id: string; type: string }[] }>(t.app, "GET", "/v1/events", {
      token: owner.token,
    }),
  );
  // Creating the sub-client wrote its client.created event before the test event.
  assert.deepEqual(
    listed.events.map((e) => e.type),
    ["client.created", "webhook.test"],
  );
  assert.equal(listed.events[1]?.id, tested.event.id);

  const [ownEvent, subEvent] = await emit(t, [
    { type: "card.payment", clientId: owner.clientId },
    { type: "card.payment", clientId: sub.clientId },
  ]);
  const [strangerEvent] = await emit(t, [{ type: "card.payment", clientId: stranger.clientId }]);
  const replay = (id: string, eventId: string | undefined) =>
    call<{ delivery: Delivery }>(t.app, "POST", `/v1/webhooks/${id}/replay`, {
      token: owner.token,
      body: { event_id: eventId },
    });
  for (const eventId of [ownEvent, subEvent]) {
    const { delivery } = expectOk(await replay(hook.id, eventId));
    assert.deepEqual([delivery.event_id, delivery.kind, delivery.status], [eventId, "REPLAY", "PENDING"]);
  }
  expectError(await replay(hook.id, strangerEvent), 3702, 404);
  expectError(await replay(subHook.id, ownEvent), 3702, 404);
  expectOk(await replay(subHook.id, subEvent));
  expectError(await replay(hook.id, "not-a-uuid"), 1000, 400);

  const { recent_deliveries } = expectOk(await state(owner.token, hook.id));
  assert.deepEqual(
    recent_deliveries.map((d) => [d.kind, d.event_id]),
    [
      ["REPLAY", subEvent],
      ["REPLAY", ownEvent],
      ["EVENT", ownEvent],
      ["TEST", tested.event.id],
    ],
  );
});

test("a disabled endpoint shows why, refuses test and replay (5702) until enabled", async () => {
  const owner = await createTenant(t);
  const hook = expectOk(await create(owner.token, { url: "https://example.com/hook" })).webhook;
  const [event] = await emit(t, [{ type: "card.activated", clientId: owner.clientId }]);
  await t.ctx.db
    .transaction()
    .execute((tx) => disableEndpoint(tx, hook.id, "All 10 attempts failed; last error: HTTP 500"));
  const disabled = expectOk(await state(owner.token, hook.id));
  assert.equal(disabled.webhook.status, "DISABLED");
  assert.equal(disabled.webhook.disabled_reason, "All 10 attempts failed; last error: HTTP 500");
  assert.ok(disabled.webhook.disabled_at);
  assert.deepEqual(
    disabled.recent_deliveries.map((d) => [d.status, d.last_error, d.next_attempt_at]),
    [["FAILED", "endpoint disabled before this delivery succeeded", null]],
  );
  expectError(await call(t.app, "POST", `/v1/webhooks/${hook.id}/test`, { token: owner.token }), 5702, 422);
  expectError(
    await call(t.app, "POST", `/v1/webhooks/${hook.id}/replay`, {
      token: owner.token,
      body: { event_id: event },
    }),
    5702,
    422,
  );
  await emit(t, [{ type: "card.activated", clientId: owner.clientId }]);
  assert.equal(expectOk(await state(owner.token, hook.id)).recent_deliveries.length, 1);

  const enabled = expectOk(
    await call<{ webhook: Webhook }>(t.app, "POST", `/v1/webhooks/${hook.id}/enable`, { token: owner.token }),
  );
  assert.deepEqual(
    [
      enabled.webhook.status,
      enabled.webhook.disabled_reason,
      enabled.webhook.disabled_at,
      enabled.webhook.failure_streak,
    ],
    ["ENABLED", null, null, 0],
  );
  expectOk(await call(t.app, "POST", `/v1/webhooks/${hook.id}/test`, { token: owner.token }));
  expectOk(await call(t.app, "POST", `/v1/webhooks/${hook.id}/enable`, { token: owner.token }));
});

test("rotating the secret shows a new one once and keeps the old one signing for the grace period", async () => {
  const owner = await createTenant(t);
  const created = expectOk(await create(owner.token, { url: "https://example.com/hook" })).webhook;
  const rotation = await call<{ webhook: Webhook; secret: string; previous_secret_expires_at: string }>(
    t.app,
    "POST",
    `/v1/webhooks/${created.id}/rotate_secret`,
    { token: owner.token },
  );
  const rotated = expectOk(rotation);
  assert.equal(rotation.headers["cache-control"], "no-store");
  assert.match(rotated.secret, /^whsec_/);
  assert.notEqual(rotated.secret, created.secret);
  assert.deepEqual(Object.keys(rotated.webhook).sort(), webhookKeys);
  const graceMs = Date.parse(rotated.previous_secret_expires_at) - Date.now();
  assert.ok(graceMs > 0 && graceMs <= limits.webhookSecretRotationGraceHours * 3600_000);
  const retired = async () => {
    const row = await t.ctx.db
      .selectFrom("webhook_endpoints")
      .select(["secret_sealed", "retired_secrets"])
      .where("id", "=", created.id)
      .executeTakeFirstOrThrow();
    const opened = (sealed: string) => open(t.ctx.keys.vault, sealed, secretContext(created.id));
    return { current: opened(row.secret_sealed), retired: row.retired_secrets.map((r) => opened(r.sealed)) };
  };
  assert.deepEqual(await retired(), { current: rotated.secret, retired: [created.secret] });

  // Regression (contract audit): a second rotation within the grace period dropped the first
  // secret at once, and a retried rotation (its answer lost) rotated again. With a key, the retry
  // replays the rotation without its secret; without one, every replaced secret keeps signing.
  const rotate = (key?: string) =>
    call<{ secret: string | null; previous_secret_expires_at: string }>(
      t.app,
      "POST",
      `/v1/webhooks/${created.id}/rotate_secret`,
      { token: owner.token, ...(key ? { headers: { "idempotency-key": key } } : {}) },
    );
  const keyed = expectOk(await rotate("rotate-1"));
  assert.match(keyed.secret ?? "", /^whsec_/);
  const replay = await rotate("rotate-1");
  assert.equal(replay.headers["idempotent-replayed"], "true");
  assert.equal(expectOk(replay).secret, null);
  assert.equal(expectOk(replay).previous_secret_expires_at, keyed.previous_secret_expires_at);
  assert.deepEqual(await retired(), { current: keyed.secret, retired: [created.secret, rotated.secret] });
  const secrets = [created.secret, rotated.secret, keyed.secret];
  for (let i = 0; i < limits.webhookRetiredSecretsMax; i++) secrets.push(expectOk(await rotate()).secret);
  const last = await retired();
  assert.equal(last.current, secrets.at(-1));
  assert.deepEqual(last.retired, secrets.slice(-1 - limits.webhookRetiredSecretsMax, -1));
});
