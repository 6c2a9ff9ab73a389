// Proves Idempotency-Key: same key and body replays the first response and moves money once; same
// key with another body is 409; keys are scoped per API key; concurrent duplicates take effect once.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { balanceOf } from "../src/ledger/ledger.ts";
import { limits } from "../src/limits.ts";
import { call, createTenant, expectError, expectOk } from "./helpers/api.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

interface Funding {
  funding: { id: string; amount: number; available: number };
}

const fund = (token: string, amount: number, key?: string) =>
  call<Funding>(t.app, "POST", "/v1/sandbox/funding", {
    token,
    body: { amount },
    ...(key ? { headers: { "idempotency-key": key } } : {}),
  });

test("same key and body: the first response is replayed and money moves once", async () => {
  const tenant = await createTenant(t);
  const first = await fund(tenant.token, 10.5, "key-1");
  const again = await fund(tenant.token, 10.5, "key-1");
  assert.deepEqual(again.body, first.body);
  assert.equal(again.headers["idempotent-replayed"], "true");
  assert.equal(first.headers["idempotent-replayed"], undefined);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 1050n);
});

test("same key, another body: 409 and nothing moves", async () => {
  const tenant = await createTenant(t);
  expectOk(await fund(tenant.token, 1, "key-2"));
  expectError(await fund(tenant.token, 2, "key-2"), 4001, 409);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 100n);
});

test("keys are scoped to the API key", async () => {
  const a = await createTenant(t);
  const b = await createTenant(t);
  expectOk(await fund(a.token, 1, "shared"));
  expectOk(await fund(b.token, 2, "shared"));
  assert.equal(await balanceOf(t.ctx.db, a.clientId), 100n);
  assert.equal(await balanceOf(t.ctx.db, b.clientId), 200n);
});

test("without a key every request takes effect", async () => {
  const tenant = await createTenant(t);
  expectOk(await fund(tenant.token, 1));
  expectOk(await fund(tenant.token, 1));
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 200n);
});

test("concurrent duplicates take effect once and all answer the same", async () => {
  const tenant = await createTenant(t);
  const responses = await Promise.all(Array.from({ length: 12 }, () => fund(tenant.token, 3, "race")));
  const ids = new Set(responses.map((r) => expectOk(r).funding.id));
  assert.equal(ids.size, 1);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 300n);
});

test("an invalid key is 1006", async () => {
  const tenant = await createTenant(t);
  for (const key of ["x".repeat(limits.idempotencyKeyLengthMax + 1), "tiene espacio", "clave-ñ"]) {
    expectError(await fund(tenant.token, 1, key), 1006, 400);
  }
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 0n);
});

test("money routes are rate limited per API key with Retry-After when configured", async () => {
  const limited = await startTestApp({ rateLimitPerSecond: 3 });
  try {
    const a = await createTenant(limited);
    const b = await createTenant(limited);
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const response = await call(limited.app, "POST", "/v1/sandbox/funding", {
        token: a.token,
        body: { amount: 1 },
      });
      statuses.push(response.status);
      if (response.status === 429) {
        expectError(response, 2009, 429);
        assert.ok(Number(response.headers["retry-after"]) >= 1);
      }
    }
    assert.ok(statuses.includes(429), `no 429 in ${statuses}`);
    // Another key has its own bucket; reads are not limited.
    expectOk(await call(limited.app, "POST", "/v1/sandbox/funding", { token: b.token, body: { amount: 1 } }));
    expectOk(await call(limited.app, "GET", "/v1/catalogs/state", { token: a.token }));
  } finally {
    await limited.close();
  }
});
