// Proves webhook delivery against a real local receiver: Standard Webhooks signatures verified with the
// README's snippet, retries after 500s and timeouts, disabling after the bound, at-least-once with one
// webhook-id across two workers and a lost worker, sub-client events only on request, no secret sent.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { sql } from "kysely";
import type { Resolve } from "../src/modules/webhooks/post.ts";
import { claimDueDeliveries } from "../src/modules/webhooks/repository.ts";
import { call, createSubClient, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { ownLogs, startTestApp, type TestApp } from "./helpers/harness.ts";
import {
  type Behaviour,
  emit,
  type Receipt,
  type Receiver,
  readmeVerifier,
  startReceiver,
  startWorker,
  type Verify,
  waitFor,
} from "./helpers/webhooks.ts";

let t: TestApp;
let verify: Verify;
const secrets: string[] = [];
const registered: { owner: Tenant; id: string }[] = [];
const allReceivers: Receiver[] = [];
const cleanups: (() => Promise<void>)[] = [];
before(async () => {
  t = await startTestApp();
  verify = await readmeVerifier();
});
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await t.close();
});

interface Webhook {
  id: string;
  status: string;
  disabled_reason: string | null;
  failure_streak: number;
  last_success_at: string | null;
  last_error: string | null;
}
interface Delivery {
  event_id: string;
  kind: string;
  status: string;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
}
type State = { webhook: Webhook; recent_deliveries: Delivery[] };

async function receiver(behaviour?: Behaviour): Promise<Receiver> {
  const started = await startReceiver(behaviour);
  cleanups.push(started.close);
  allReceivers.push(started);
  return started;
}

/** Registers an endpoint through the API and remembers its secret (for the "never sent" check). */
async function register(owner: Tenant, url: string, extra: Record<string, unknown> = {}) {
  const { webhook } = expectOk(
    await call<{ webhook: Webhook & { secret: string } }>(t.app, "POST", "/v1/webhooks", {
      token: owner.token,
      body: { url, ...extra },
    }),
  );
  secrets.push(webhook.secret);
  registered.push({ owner, id: webhook.id });
  return webhook;
}

const state = async (owner: Tenant, id: string) =>
  expectOk(await call<State>(t.app, "GET", `/v1/webhooks/${id}`, { token: owner.token }));

async function settled(owner: Tenant, id: string, count = 1): Promise<Delivery[]> {
  return waitFor(`${count} settled deliveries of ${id}`, async () => {
    const deliveries = (await state(owner, id)).recent_deliveries;
    return deliveries.length >= count && deliveries.every((d) => d.status !== "PENDING") && deliveries;
  });
}

function assertSigned(receipt: Receipt, secret: string): void {
  assert.equal(receipt.headers["content-type"], "application/json");
  assert.ok(
    verify(secret, receipt.headers, receipt.body),
    `bad signature: ${JSON.stringify(receipt.headers)}`,
  );
  assert.ok(!verify(secret, receipt.headers, `${receipt.body} `), "a changed body must not verify");
  assert.ok(!verify(`whsec_${Buffer.alloc(32).toString("base64")}`, receipt.headers, receipt.body));
  const old = { ...receipt.headers, "webhook-timestamp": String(Math.floor(Date.now() / 1000) - 3600) };
  assert.ok(!verify(secret, old, receipt.body), "an old timestamp must not verify");
}

test("a delivery is the event envelope, signed per Standard Webhooks; the README snippet verifies it", async () => {
  const owner = await createTenant(t);
  const inbox = await receiver();
  const hook = await register(owner, `${inbox.url}/hook`);
  const secret = secrets.at(-1) ?? "";
  const worker = startWorker(t);
  try {
    const [eventId] = await emit(t, [
      {
        type: "cardholder.created",
        clientId: owner.clientId,
        data: { cardholder: { id: "c1", name: "MARÍA ÑUÑEZ" } },
      },
    ]);
    const [delivery] = await settled(owner, hook.id);
    assert.deepEqual(
      [delivery?.status, delivery?.attempts, delivery?.last_status_code, delivery?.kind],
      ["DELIVERED", 1, 204, "EVENT"],
    );
    assert.equal(inbox.receipts.length, 1);
    const [receipt] = inbox.receipts;
    assert.ok(receipt);
    assert.equal(receipt.path, "/hook");
    assert.equal(receipt.headers["webhook-id"], eventId);
    assert.match(String(receipt.headers["webhook-timestamp"]), /^[0-9]{10}$/);
    assert.match(String(receipt.headers["webhook-signature"]), /^v1,[A-Za-z0-9+/]{43}=$/);
    assertSigned(receipt, secret);
    const listed = expectOk(
      await call<{ events: unknown[] }>(t.app, "GET", "/v1/events", { token: owner.token }),
    ).events;
    assert.deepEqual(JSON.parse(receipt.body), listed[0]);
    assert.deepEqual(Object.keys(JSON.parse(receipt.body)), [
      "id",
      "type",
      "created_at",
      "client_id",
      "data",
    ]);

    const tested = expectOk(
      await call<{ event: { id: string } }>(t.app, "POST", `/v1/webhooks/${hook.id}/test`, {
        token: owner.token,
      }),
    );
    await settled(owner, hook.id, 2);
    const testReceipt = inbox.receipts[1];
    assert.ok(testReceipt);
    assert.equal(testReceipt.headers["webhook-id"], tested.event.id);
    assert.equal(JSON.parse(testReceipt.body).type, "webhook.test");
    assertSigned(testReceipt, secret);
    const after = (await state(owner, hook.id)).webhook;
    assert.deepEqual([after.status, after.failure_streak, after.last_error], ["ENABLED", 0, null]);
    assert.ok(after.last_success_at);
  } finally {
    await worker.stop();
  }
});

test("500s are retried with the same webhook-id until the receiver answers 2xx", async () => {
  const owner = await createTenant(t);
  const inbox = await receiver((_, index) => ({ status: index < 2 ? 500 : 200 }));
  const hook = await register(owner, `${inbox.url}/flaky`);
  const worker = startWorker(t, { attemptsMax: 5 });
  try {
    const [eventId] = await emit(t, [{ type: "card.payment", clientId: owner.clientId }]);
    const [delivery] = await settled(owner, hook.id);
    assert.deepEqual(
      [delivery?.status, delivery?.attempts, delivery?.last_status_code, delivery?.last_error],
      ["DELIVERED", 3, 200, null],
    );
    assert.deepEqual(
      inbox.receipts.map((r) => r.headers["webhook-id"]),
      [eventId, eventId, eventId],
    );
    assert.equal(new Set(inbox.receipts.map((r) => r.body)).size, 1);
    for (const receipt of inbox.receipts) assertSigned(receipt, secrets.at(-1) ?? "");
    const { webhook } = await state(owner, hook.id);
    assert.deepEqual(
      [webhook.status, webhook.failure_streak, webhook.last_error],
      ["ENABLED", 0, "HTTP 500"],
    );
  } finally {
    await worker.stop();
  }
});

test("an endpoint registered in sandbox is not called once the service runs outside it", async () => {
  // Regression (HTTP audit): the URL was checked only when registered, so http://127.0.0.1 kept
  // receiving deliveries after a restart with EMISOR_SANDBOX=false.
  const owner = await createTenant(t);
  const inbox = await receiver();
  const hook = await register(owner, `${inbox.url}/sandbox-only`);
  const worker = startWorker(t, { attemptsMax: 2 }, false);
  try {
    await emit(t, [{ type: "card.payment", clientId: owner.clientId }]);
    const [delivery] = await settled(owner, hook.id);
    assert.equal(delivery?.status, "FAILED");
    assert.match(delivery?.last_error ?? "", /^not called: url: must be https/);
    assert.equal(inbox.receipts.length, 0);
  } finally {
    await worker.stop();
  }
});

test("a host name that resolves to a local or private address is not called: the worker checks the addresses it connects to", async () => {
  // Regression (third audit): the URL's name was never resolved by the check, so a public name
  // whose DNS answered 127.0.0.1, 10.x or 169.254.169.254 (at once, or only after registration:
  // DNS rebinding) turned the worker against Emisor's own network.
  const owner = await createTenant(t);
  const answers: Record<string, string[]> = {
    "loopback.example.test": ["127.0.0.1"],
    "mixed.example.test": ["8.8.8.8", "10.0.0.5"],
    "metadata.example.test": ["169.254.169.254"],
    "mapped.example.test": ["::ffff:127.0.0.1"],
  };
  const asked: string[] = [];
  const resolve: Resolve = async (hostname) => {
    asked.push(hostname);
    return (answers[hostname] ?? []).map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  };
  const hooks = [];
  for (const name of Object.keys(answers)) hooks.push(await register(owner, `https://${name}/hook`));
  const worker = startWorker(t, { attemptsMax: 1 }, false, resolve);
  try {
    await emit(t, [{ type: "card.payment", clientId: owner.clientId }]);
    for (const [index, name] of Object.keys(answers).entries()) {
      const [delivery] = await settled(owner, hooks[index]?.id ?? "");
      assert.equal(delivery?.status, "FAILED");
      assert.equal(delivery?.last_error, `not called: ${name} resolves to a local or private address`);
    }
    // One resolution per attempt: the addresses checked are the ones the connection would use.
    assert.deepEqual(asked.sort(), Object.keys(answers).sort());
  } finally {
    await worker.stop();
  }
});

test("in sandbox, http://localhost is called through the same lookup", async () => {
  const owner = await createTenant(t);
  const inbox = await receiver();
  const hook = await register(owner, `${inbox.url.replace("127.0.0.1", "localhost")}/by-name`);
  const worker = startWorker(t, { attemptsMax: 1 }, true, async () => [{ address: "127.0.0.1", family: 4 }]);
  try {
    await emit(t, [{ type: "card.payment", clientId: owner.clientId }]);
    const [delivery] = await settled(owner, hook.id);
    assert.equal(delivery?.status, "DELIVERED");
    assert.equal(inbox.receipts.length, 1);
    assert.equal(inbox.receipts[0]?.path, "/by-name");
  } finally {
    await worker.stop();
  }
});

test("one tenant's endpoints that hang do not hold every delivery slot: another tenant's event goes out at once", async () => {
  // Regression (third audit): deliveries were claimed oldest first from one queue, so a tenant
  // with 20 endpoints that never answered held all 16 slots, and another tenant's delivery waited
  // 4 minutes. Here the hanging receiver holds an attempt for the whole 30 s timeout: without the
  // fairness every slot would be taken and the other tenant's delivery would wait past waitFor's.
  const noisy = await createTenant(t);
  const quiet = await createTenant(t);
  const hanging = await receiver(() => ({ status: 200, delayMs: 60_000 }));
  const prompt = await receiver();
  for (let i = 0; i < 3; i++) await register(noisy, `${hanging.url}/hang-${i}`);
  const hook = await register(quiet, `${prompt.url}/quiet`);
  await emit(
    t,
    Array.from({ length: 5 }, () => ({ type: "card.payment" as const, clientId: noisy.clientId })),
  );
  const worker = startWorker(t, {
    concurrency: 4,
    concurrencyPerClient: 2,
    timeoutMs: 30_000,
    leaseMs: 60_000,
  });
  try {
    await waitFor("the noisy tenant's attempts to start", () => hanging.receipts.length >= 2);
    await emit(t, [{ type: "card.payment", clientId: quiet.clientId }]);
    const [delivery] = await settled(quiet, hook.id);
    assert.equal(delivery?.status, "DELIVERED");
    // The noisy tenant never held more than its share of the 4 slots at once.
    assert.ok(hanging.receipts.length <= 3, `${hanging.receipts.length} attempts in flight`);
  } finally {
    await worker.stop();
  }
});

test("a receiver slower than the timeout is retried with the same webhook-id", async () => {
  const owner = await createTenant(t);
  const inbox = await receiver((_, index) => ({ status: 200, delayMs: index === 0 ? 10_000 : 0 }));
  const hook = await register(owner, `${inbox.url}/slow`);
  const worker = startWorker(t, { timeoutMs: 500 });
  try {
    const [eventId] = await emit(t, [{ type: "transfer.in.received", clientId: owner.clientId }]);
    const [delivery] = await settled(owner, hook.id);
    assert.equal(delivery?.status, "DELIVERED");
    assert.ok((delivery?.attempts ?? 0) >= 2);
    assert.equal(inbox.receipts.length, delivery?.attempts);
    assert.deepEqual(new Set(inbox.receipts.map((r) => r.headers["webhook-id"])), new Set([eventId]));
    const { webhook } = await state(owner, hook.id);
    assert.equal(webhook.last_error, "timed out after 500 ms");
  } finally {
    await worker.stop();
  }
});

test("an endpoint failing every attempt of a delivery is disabled, with the reason visible through GET", async () => {
  const owner = await createTenant(t);
  let healthy = false;
  const inbox = await receiver(() => ({ status: healthy ? 200 : 503 }));
  const hook = await register(owner, `${inbox.url}/down`);
  const worker = startWorker(t, { attemptsMax: 3 });
  try {
    const [eventId] = await emit(t, [{ type: "airtime.failed", clientId: owner.clientId }]);
    const disabled = await waitFor("the endpoint to be disabled", async () => {
      const current = await state(owner, hook.id);
      return current.webhook.status === "DISABLED" && current;
    });
    assert.equal(inbox.receipts.length, 3);
    assert.match(
      disabled.webhook.disabled_reason ?? "",
      new RegExp(
        `^All 3 attempts to deliver event ${eventId} since .+ failed, with no successful delivery in between; last error: HTTP 503$`,
      ),
    );
    assert.deepEqual([disabled.webhook.failure_streak, disabled.webhook.last_error], [3, "HTTP 503"]);
    assert.deepEqual(
      disabled.recent_deliveries.map((d) => [d.status, d.attempts, d.last_status_code]),
      [["FAILED", 3, 503]],
    );

    // Disabled: new events are not queued for it, and nothing more is sent.
    await emit(t, [{ type: "airtime.failed", clientId: owner.clientId }]);
    expectError(await call(t.app, "POST", `/v1/webhooks/${hook.id}/test`, { token: owner.token }), 5702, 422);
    assert.equal((await state(owner, hook.id)).recent_deliveries.length, 1);

    // Fixed and enabled: the owner replays what it missed.
    healthy = true;
    expectOk(await call(t.app, "POST", `/v1/webhooks/${hook.id}/enable`, { token: owner.token }));
    expectOk(
      await call(t.app, "POST", `/v1/webhooks/${hook.id}/replay`, {
        token: owner.token,
        body: { event_id: eventId },
      }),
    );
    const deliveries = await settled(owner, hook.id, 2);
    assert.deepEqual(
      deliveries.map((d) => [d.kind, d.status]),
      [
        ["REPLAY", "DELIVERED"],
        ["EVENT", "FAILED"],
      ],
    );
    assert.equal(inbox.receipts.at(-1)?.headers["webhook-id"], eventId);
  } finally {
    await worker.stop();
  }
});

test("a delivery that keeps failing does not disable an endpoint that delivered others meanwhile", async () => {
  const owner = await createTenant(t);
  const inbox = await receiver((receipt) => ({ status: JSON.parse(receipt.body).data.poison ? 400 : 200 }));
  const hook = await register(owner, `${inbox.url}/picky`);
  const worker = startWorker(t, { attemptsMax: 3, backoffBaseMs: 100 });
  try {
    await emit(t, [{ type: "card.payment", clientId: owner.clientId, data: { poison: true } }]);
    await waitFor("a first failed attempt", () => inbox.receipts.length >= 1);
    await emit(t, [{ type: "card.payment", clientId: owner.clientId, data: { poison: false } }]);
    const deliveries = await settled(owner, hook.id, 2);
    assert.deepEqual(deliveries.map((d) => d.status).sort(), ["DELIVERED", "FAILED"]);
    assert.equal((await state(owner, hook.id)).webhook.status, "ENABLED");
  } finally {
    await worker.stop();
  }
});

test("two workers on one database deliver each event once per endpoint, with its own webhook-id", async () => {
  const owner = await createTenant(t);
  const inbox = await receiver();
  const first = await register(owner, `${inbox.url}/a`);
  const second = await register(owner, `${inbox.url}/b`);
  const eventIds = await emit(
    t,
    Array.from({ length: 30 }, (_, i) => ({
      type: "card.payment" as const,
      clientId: owner.clientId,
      data: { i },
    })),
  );
  const workers = [startWorker(t, { concurrency: 4 }), startWorker(t, { concurrency: 4 })];
  try {
    await waitFor("every delivery", async () => {
      const pending = await sql<{ n: number }>`select count(*)::int as n from webhook_deliveries
        where endpoint_id in (${first.id}, ${second.id}) and status <> 'DELIVERED'`.execute(t.ctx.db);
      return pending.rows[0]?.n === 0;
    });
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
  }
  for (const hookPath of ["/a", "/b"]) {
    const ids = inbox.receipts.filter((r) => r.path === hookPath).map((r) => String(r.headers["webhook-id"]));
    assert.equal(ids.length, eventIds.length, `${hookPath} received ${ids.length}`);
    assert.deepEqual([...ids].sort(), [...eventIds].sort());
  }
});

test("a worker lost mid-delivery: its lease runs out and another sends it, with the same webhook-id", async () => {
  const owner = await createTenant(t);
  const inbox = await receiver();
  const hook = await register(owner, `${inbox.url}/lost`);
  const [eventId] = await emit(t, [{ type: "card.status_changed", clientId: owner.clientId }]);
  // A worker claims the delivery and dies before sending it (nothing records an outcome). The
  // claim is global: earlier tests' retries may fall due meanwhile and be claimed with it.
  const claimed = await claimDueDeliveries(t.ctx.db, 1000, 300);
  assert.deepEqual(
    claimed.filter((c) => c.endpoint_id === hook.id).map((c) => [c.event_id, c.attempts]),
    [[eventId, 1]],
  );
  const worker = startWorker(t);
  try {
    const [delivery] = await settled(owner, hook.id);
    assert.deepEqual([delivery?.status, delivery?.attempts], ["DELIVERED", 2]);
    assert.deepEqual(
      inbox.receipts.map((r) => r.headers["webhook-id"]),
      [eventId],
    );
  } finally {
    await worker.stop();
  }
});

test("stopping a worker aborts attempts in flight and gives them back uncounted", async () => {
  const owner = await createTenant(t);
  const inbox = await receiver(() => ({ status: 200, delayMs: 60_000 }));
  const hook = await register(owner, `${inbox.url}/hang`);
  const worker = startWorker(t, { timeoutMs: 60_000 });
  await emit(t, [{ type: "card.activated", clientId: owner.clientId }]);
  await waitFor("the attempt to reach the receiver", () => inbox.receipts.length === 1);
  await worker.stop();
  const [delivery] = (await state(owner, hook.id)).recent_deliveries;
  assert.deepEqual([delivery?.status, delivery?.attempts, delivery?.last_error], ["PENDING", 0, null]);
});

test("a parent receives its sub-clients' events only on an endpoint that asked for them", async () => {
  const parent = await createTenant(t);
  const stranger = await createTenant(t);
  const sub = await createSubClient(t, parent);
  const grandchild = await createSubClient(t, sub);
  const inbox = await receiver();
  const own = await register(parent, `${inbox.url}/own`);
  const tree = await register(parent, `${inbox.url}/tree`, { include_subclients: true });
  const payments = await register(parent, `${inbox.url}/payments`, {
    include_subclients: true,
    event_types: ["card.payment"],
  });
  const subOwn = await register(parent, `${inbox.url}/sub`, { client_id: sub.clientId });
  const [parentEvent, subEvent, grandEvent, subPayment] = await emit(t, [
    { type: "card.assigned", clientId: parent.clientId },
    { type: "cardholder.created", clientId: sub.clientId },
    { type: "client.created", clientId: grandchild.clientId },
    { type: "card.payment", clientId: sub.clientId },
  ]);
  await emit(t, [{ type: "card.payment", clientId: stranger.clientId }]);
  const worker = startWorker(t);
  try {
    await settled(parent, tree.id, 4);
    await settled(parent, own.id, 1);
    await settled(parent, payments.id, 1);
    await settled(parent, subOwn.id, 2);
  } finally {
    await worker.stop();
  }
  const idsAt = (hookPath: string) =>
    inbox.receipts
      .filter((r) => r.path === hookPath)
      .map((r) => String(r.headers["webhook-id"]))
      .sort();
  assert.deepEqual(idsAt("/own"), [parentEvent].sort());
  assert.deepEqual(idsAt("/tree"), [parentEvent, subEvent, grandEvent, subPayment].sort());
  assert.deepEqual(idsAt("/payments"), [subPayment].sort());
  assert.deepEqual(idsAt("/sub"), [subEvent, subPayment].sort());
  assert.equal(inbox.receipts.length, 8);
});

test("after rotations every secret still in its grace period signs, and each verifies on its own", async () => {
  const owner = await createTenant(t);
  const inbox = await receiver();
  const hook = await register(owner, `${inbox.url}/rotated`);
  const oldSecret = secrets.at(-1) ?? "";
  const rotate = async () => {
    const rotated = expectOk(
      await call<{ secret: string }>(t.app, "POST", `/v1/webhooks/${hook.id}/rotate_secret`, {
        token: owner.token,
      }),
    );
    secrets.push(rotated.secret);
    return rotated;
  };
  // Rotated twice within the grace period: both replaced secrets still sign.
  const middle = await rotate();
  const rotated = await rotate();
  const worker = startWorker(t);
  try {
    expectOk(await call(t.app, "POST", `/v1/webhooks/${hook.id}/test`, { token: owner.token }));
    await settled(owner, hook.id);
  } finally {
    await worker.stop();
  }
  const [receipt] = inbox.receipts;
  assert.ok(receipt);
  assert.match(String(receipt.headers["webhook-signature"]), /^v1,\S+ v1,\S+ v1,\S+$/);
  assertSigned(receipt, rotated.secret);
  assertSigned(receipt, middle.secret);
  assertSigned(receipt, oldSecret);
  await sql`update webhook_endpoints set retired_secrets = (
      select jsonb_agg(jsonb_set(s, '{expires_at}', to_jsonb(now()))) from jsonb_array_elements(retired_secrets) s)
    where id = ${hook.id}`.execute(t.ctx.db);
  const again = startWorker(t);
  try {
    expectOk(await call(t.app, "POST", `/v1/webhooks/${hook.id}/test`, { token: owner.token }));
    await settled(owner, hook.id, 2);
  } finally {
    await again.stop();
  }
  const latest = inbox.receipts[1];
  assert.ok(latest);
  assert.match(String(latest.headers["webhook-signature"]), /^v1,\S+$/);
  assertSigned(latest, rotated.secret);
  assert.ok(!verify(oldSecret, latest.headers, latest.body));
});

test("no signing secret ever reaches a delivery, an API response, a stored replay or the log", async () => {
  assert.ok(secrets.length >= 10);
  const keys = secrets.map((secret) => secret.slice("whsec_".length));
  const everything: string[] = [];
  for (const { owner, id } of registered) {
    for (const url of [`/v1/webhooks/${id}`, "/v1/webhooks", "/v1/events?limit=100"])
      everything.push(JSON.stringify(expectOk(await call(t.app, "GET", url, { token: owner.token }))));
  }
  const stored = await sql<{ body: unknown }>`select response_body as body from idempotency_keys`.execute(
    t.ctx.db,
  );
  everything.push(JSON.stringify(stored.rows));
  const events = await sql<{ data: unknown }>`select data from events`.execute(t.ctx.db);
  everything.push(JSON.stringify(events.rows));
  everything.push(ownLogs());
  for (const inbox of allReceivers)
    for (const receipt of inbox.receipts) everything.push(JSON.stringify(receipt));
  assert.ok(everything.length > registered.length * 3);
  for (const text of everything) for (const key of keys) assert.ok(!text.includes(key), "a secret leaked");
});
