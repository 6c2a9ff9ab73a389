// Proves Idempotency-Key: same key and body replays the first response and moves money once; same
// key with another body is 409; keys are scoped per API key; concurrent duplicates take effect once.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { sql } from "kysely";
import { isDatabaseUnavailable } from "../src/db/failures.ts";
import { AppError, errors } from "../src/errors.ts";
import { ok } from "../src/http/envelope.ts";
import { requestHash } from "../src/idempotency/fingerprint.ts";
import { runIdempotent } from "../src/idempotency/run.ts";
import { purgeIdempotencyKeys, recordResponse } from "../src/idempotency/store.ts";
import { balanceOf } from "../src/ledger/ledger.ts";
import { limits } from "../src/limits.ts";
import { call, createTenant, expectError, expectOk } from "./helpers/api.ts";
import { cardsFor } from "./helpers/cards.ts";
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

test("the same operation written as another URL is the same request: a replay, not 4001", async () => {
  // Regression (HTTP audit): the fingerprint hashed the URL as written.
  const tenant = await createTenant(t);
  const first = await fund(tenant.token, 3, "key-url");
  for (const url of ["/v1/sandbox/funding/", "/v1/sandbox/fundin%67"]) {
    const again = await call<Funding>(t.app, "POST", url, {
      token: tenant.token,
      body: { amount: 3 },
      headers: { "idempotency-key": "key-url" },
    });
    assert.equal(again.headers["idempotent-replayed"], "true", url);
    assert.deepEqual(again.body, first.body);
  }
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 300n);
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

/** Ages a stored key as if it had been stored `hours` ago. */
async function ageKey(apiKeyId: string, key: string, hours: number): Promise<void> {
  const aged = await sql`
    update idempotency_keys set created_at = now() - make_interval(hours => ${hours})
    where api_key_id = ${apiKeyId} and key = ${key}`.execute(t.ctx.db);
  assert.equal(aged.numAffectedRows, 1n);
}

const storedKeys = async (apiKeyId: string) =>
  (
    await t.ctx.db
      .selectFrom("idempotency_keys")
      .select("key")
      .where("api_key_id", "=", apiKeyId)
      .orderBy("key")
      .execute()
  ).map((r) => r.key);

test("a key stored more than 48 hours ago is not replayed: the request runs anew (purged or not)", async () => {
  // Regression (audit): keys were never purged, so a key reused after its 48 hours replayed the
  // old answer (or answered 4001 for another body) instead of running the new request.
  const tenant = await createTenant(t);
  const first = expectOk(await fund(tenant.token, 1, "old-key"));
  await ageKey(tenant.apiKeyId, "old-key", limits.idempotencyKeyTtlHours + 1);
  const again = await fund(tenant.token, 1, "old-key");
  assert.equal(again.headers["idempotent-replayed"], undefined);
  const second = expectOk(again);
  assert.notEqual(second.funding.id, first.funding.id);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 200n);
  // The key is stored again, fresh: the next retry replays the new answer.
  const replay = await fund(tenant.token, 1, "old-key");
  assert.equal(replay.headers["idempotent-replayed"], "true");
  assert.equal(expectOk(replay).funding.id, second.funding.id);
  // Another body under an expired key is a new request too, not 4001.
  await ageKey(tenant.apiKeyId, "old-key", limits.idempotencyKeyTtlHours + 1);
  expectOk(await fund(tenant.token, 2, "old-key"));
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 400n);
});

test("a payment under a key older than 48 hours is a new payment; a fresh key still replays", async () => {
  // The payment path looks keys up in its own statements (payments/repository.ts): the one sent
  // at once finds the expired row taken and falls back to the locked form, which takes it over.
  const tenant = await createTenant(t, { available: 100 });
  const [card] = await cardsFor(t, tenant, 1);
  assert.ok(card);
  const pay = (amount: number, key: string) =>
    call<{ operation: { id: string } }>(t.app, "POST", "/v1/cards/payment", {
      token: tenant.token,
      body: { card_number: card.id, amount, payment_description: "Pago", latitude: 19.4, longitude: -99.1 },
      headers: { "idempotency-key": key },
    });
  const first = expectOk(await pay(10, "pay-old")).operation.id;
  const fresh = await pay(10, "pay-old");
  assert.equal(fresh.headers["idempotent-replayed"], "true");
  assert.equal(expectOk(fresh).operation.id, first);
  await ageKey(tenant.apiKeyId, "pay-old", limits.idempotencyKeyTtlHours + 1);
  const again = await pay(10, "pay-old");
  assert.equal(again.headers["idempotent-replayed"], undefined);
  const second = expectOk(again).operation.id;
  assert.notEqual(second, first);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 8000n);
  const replay = await pay(10, "pay-old");
  assert.equal(replay.headers["idempotent-replayed"], "true");
  assert.equal(expectOk(replay).operation.id, second);
  // A refusal under an expired key is decided again too (under lock: the batch cannot be afforded).
  await ageKey(tenant.apiKeyId, "pay-old", limits.idempotencyKeyTtlHours + 1);
  expectError(await pay(1000, "pay-old"), 5401);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 8000n);
});

test("the purge pass deletes keys older than 48 hours, in bounded batches, and keeps the others", async () => {
  const tenant = await createTenant(t);
  for (const key of ["purge-a", "purge-b", "purge-c", "purge-fresh", "purge-47h"])
    expectOk(await fund(tenant.token, 1, key));
  for (const key of ["purge-a", "purge-b", "purge-c"])
    await ageKey(tenant.apiKeyId, key, limits.idempotencyKeyTtlHours + 1);
  await ageKey(tenant.apiKeyId, "purge-47h", limits.idempotencyKeyTtlHours - 1);
  // Other tests of this file may leave expired keys too: purge until a pass finds none.
  assert.equal(await purgeIdempotencyKeys(t.ctx.db, 2), 2);
  while ((await purgeIdempotencyKeys(t.ctx.db, 2)) > 0);
  assert.deepEqual(await storedKeys(tenant.apiKeyId), ["purge-47h", "purge-fresh"]);
  const replay = await fund(tenant.token, 1, "purge-47h");
  assert.equal(replay.headers["idempotent-replayed"], "true");
  const anew = await fund(tenant.token, 1, "purge-a");
  assert.equal(anew.headers["idempotent-replayed"], undefined);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 600n);
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

test("a key taken by a duplicate whose answer cannot be read (database gone in between) is 503, not 500", async () => {
  const tenant = await createTenant(t);
  const scope = { apiKeyId: tenant.apiKeyId, key: "gone-between", requestHash: "h" };
  await t.ctx.db.transaction().execute((tx) => recordResponse(tx, scope, { status: 200, body: ok({}) }));
  // The work's own transaction finds the key taken; then the lookup of the stored answer fails
  // the way a restarting PostgreSQL fails it.
  const lost = Object.assign(new Error("Connection terminated unexpectedly"), { code: "ECONNRESET" });
  const flaky = new Proxy(t.ctx.db, {
    get: (target, property) => {
      if (property === "selectFrom")
        return () => {
          throw lost;
        };
      // Kysely's methods use private fields: they must run on the real object.
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const failure = await runIdempotent(flaky, scope, async () => ({ status: 200, body: ok({}) })).then(
    () => undefined,
    (error: unknown) => error,
  );
  assert.equal(failure, lost);
  assert.ok(isDatabaseUnavailable(failure));
  // Likewise when the work failed with a business error the duplicate may have caused (its debit
  // left too little): a 422 would tell the client the money did not move. Found by the bank test.
  const refused = await runIdempotent(flaky, scope, async () => {
    throw new AppError(errors.speiInsufficientFunds);
  }).then(
    () => undefined,
    (error: unknown) => error,
  );
  assert.equal(refused, lost);
});

test("a refusal is final for its key: a duplicate still in flight replays it instead of taking effect", async () => {
  // The bank test's case: the client gave up on attempt 1 (still queued in the service), its
  // retry was refused (too little money then), and attempt 1 then found money (a return came in).
  const tenant = await createTenant(t);
  const scope = { apiKeyId: tenant.apiKeyId, key: "refused-then-late", requestHash: "h" };
  const refused = await runIdempotent(t.ctx.db, scope, async () => {
    throw new AppError(errors.speiInsufficientFunds);
  }).then(
    () => undefined,
    (error: unknown) => error,
  );
  assert.ok(refused instanceof AppError && refused.def === errors.speiInsufficientFunds);
  const entryId = randomUUID();
  const late = await runIdempotent(t.ctx.db, scope, async (tx) => {
    await tx.insertInto("journal_entries").values({ id: entryId, kind: "TEST" }).execute();
    return { status: 200, body: ok({ moved: true }) };
  });
  assert.equal(late.status, 422);
  assert.equal(late.replayed, true);
  assert.equal(late.body.code, errors.speiInsufficientFunds.code);
  const written = await t.ctx.db
    .selectFrom("journal_entries")
    .select("id")
    .where("id", "=", entryId)
    .executeTakeFirst();
  assert.equal(written, undefined, "the late attempt's work was rolled back");
});

test("a key stored by an earlier release (its fingerprint over the URL's path and body) still replays after an upgrade", async () => {
  // Regression (third audit): the fingerprint's form changed (route and decoded parameters; the
  // rest of the body and the deciphered card on ciphered routes), and every key stored before an
  // upgrade answered 4001 to its own retry: a client whose request timed out during a deploy could
  // not learn its outcome.
  const tenant = await createTenant(t, { available: 100 });
  const [card] = await cardsFor(t, tenant, 1);
  assert.ok(card);
  const payment = {
    card_number: card.id,
    amount: 3,
    payment_description: "Antes del despliegue",
    latitude: 19.4,
    longitude: -99.1,
  };
  const send = (key: string) =>
    key.startsWith("old-fund")
      ? fund(tenant.token, 5, key)
      : call(t.app, "POST", "/v1/cards/payment", {
          token: tenant.token,
          body: payment,
          headers: { "idempotency-key": key },
        });
  const hashKey = t.ctx.keys.idempotency;
  const { card_number: _card, ...rest } = payment;
  for (const [key, storedHash] of [
    ["old-fund-1", requestHash(hashKey, "POST", "/v1/sandbox/funding", { amount: 5 })],
    ["old-pay-1", requestHash(hashKey, "POST", "/v1/cards/payment", payment)],
    // Regression (upgrade audit): on routes with ciphered fields the earlier release stored the
    // rest of the body at the URL's path, completed with the card it named; that form answered
    // 4001 to its own retry after an upgrade (payments, transfers out and top-ups alike).
    [
      "old-pay-2",
      requestHash(hashKey, "deciphered", requestHash(hashKey, "POST", "/v1/cards/payment", rest), {
        card_number: card.id,
      }),
    ],
  ] as const) {
    const first = await send(key);
    expectOk(first);
    // As the earlier release stored it.
    await t.ctx.db
      .updateTable("idempotency_keys")
      .set({ request_hash: storedHash })
      .where("key", "=", key)
      .execute();
    const again = await send(key);
    expectOk(again);
    assert.equal(again.headers["idempotent-replayed"], "true", key);
    assert.deepEqual(again.body, first.body);
  }
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), 10_000n + 500n - 300n - 300n);
});
