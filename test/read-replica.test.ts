// Proves that with DATABASE_READ_URL the heavy listings read a real streaming replica, that a
// caller reads its own write there at once (an incoming transfer, a payment, its events), and that
// a replica that stopped replaying costs a listing at most the wait bound before the primary answers.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { pino } from "pino";
import { Postgres } from "../bench/lib/pg.ts";
import { buildApp } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { createContext } from "../src/context.ts";
import { type Database, openDatabase } from "../src/db/database.ts";
import { lsnValue } from "../src/db/listings.ts";
import { migrate } from "../src/db/migrate.ts";
import { limits } from "../src/limits.ts";
import { PrivateCluster } from "./chaos/cluster.ts";
import { call, createTenant, expectOk } from "./helpers/api.ts";
import { spendableCard } from "./helpers/cards.ts";
import type { TestApp } from "./helpers/harness.ts";

// The replica is a cluster of this test's own (pg_basebackup of a private primary): the shared
// server of DATABASE_URL has none. The embedded engine has no replicas at all.
const skip = process.env.DATABASE_URL
  ? false
  : "needs PostgreSQL (DATABASE_URL): the embedded engine has no replicas to read from";

let primary: PrivateCluster;
let standby: PrivateCluster;
let database: Database;
let replica: Database;
let t: TestApp;

before(async () => {
  if (skip) return;
  primary = await PrivateCluster.create();
  standby = await primary.createStandby("reader");
  await new Postgres(primary.url).sql("postgres", "create database emisor");
  await standby.caughtUp(primary);
  const url = (port: number) => `postgres://postgres@127.0.0.1:${port}/emisor`;
  const config = {
    ...loadConfig({ DATABASE_URL: url(primary.port), DATABASE_READ_URL: url(standby.port) }),
    dataDir: path.join(tmpdir(), `emisor-test-${process.pid}`),
    masterKey: randomBytes(32).toString("hex"),
    authCacheSeconds: 0,
  };
  database = await openDatabase({ databaseUrl: url(primary.port), poolSize: 5 });
  replica = await openDatabase({ databaseUrl: url(standby.port), poolSize: 5 });
  await migrate(database);
  const ctx = await createContext(config, database, () => {}, replica);
  const app = await buildApp(ctx, { loggerInstance: pino({ level: "silent" }) });
  t = {
    app,
    ctx,
    database,
    engine: "postgres",
    config,
    databaseUrl: url(primary.port),
    close: async () => {},
  };
});

after(async () => {
  if (skip) return;
  await t?.app.close();
  await replica?.close();
  await database?.close();
  await standby?.destroy();
  await primary?.destroy();
});

/** How many listings went to each side while `work` ran. */
async function routed(work: () => Promise<void>): Promise<{ replica: number; primary: number }> {
  const before = { ...t.ctx.listings.counts };
  await work();
  return {
    replica: t.ctx.listings.counts.replica - before.replica,
    primary: t.ctx.listings.counts.primary - before.primary,
  };
}

test("a listing right after a write reads the replica, and the write is there", { skip }, async () => {
  const tenant = await createTenant(t, { available: 1000 });
  const auth = { token: tenant.token };
  const card = await spendableCard(t, tenant, { commission: 0, funds: 0 });
  const tracking = `RR${Date.now()}`;
  const where = await routed(async () => {
    expectOk(
      await call(t.app, "POST", "/v1/sandbox/spei/incoming", {
        ...auth,
        body: { clabe: tenant.clabe, amount: 12.5, tracking_key: tracking },
      }),
    );
    const today = new Date().toISOString().slice(0, 10);
    const operations = expectOk(
      await call<{ client: { transfer_operations: { items: { clave_rastreo: string }[] } } }>(
        t.app,
        "GET",
        `/v1/transfer/clabe/collection/${tenant.clabe}/operations?init_date=${today}&end_date=${today}`,
        auth,
      ),
    );
    assert.ok(operations.client.transfer_operations.items.some((item) => item.clave_rastreo === tracking));

    expectOk(
      await call(t.app, "POST", "/v1/cards/payment", {
        ...auth,
        body: {
          card_number: card.id,
          amount: 7,
          payment_description: "read-your-writes",
          latitude: 19.4,
          longitude: -99.1,
        },
      }),
    );
    const movements = expectOk(
      await call<{ movements: { items: { description: string }[] } }>(
        t.app,
        "GET",
        `/v1/cards/${card.id}/movements`,
        auth,
      ),
    );
    assert.equal(movements.movements.items[0]?.description, "read-your-writes");

    const events = expectOk(
      await call<{ events: { type: string; data: { description?: string } }[] }>(
        t.app,
        "GET",
        "/v1/events?limit=100",
        auth,
      ),
    );
    assert.ok(events.events.some((event) => event.type === "card.payment"));
    expectOk(await call(t.app, "GET", `/v1/cards/${card.id}/authorizations`, auth));
  });
  // Four listings, each served by the replica once it had replayed the write before it.
  assert.deepEqual(where, { replica: 4, primary: 0 });
});

test("a replica that stopped replaying: the listing waits at most the bound, then the primary answers it", {
  skip,
}, async () => {
  const tenant = await createTenant(t, { available: 1000 });
  const auth = { token: tenant.token };
  const card = await spendableCard(t, tenant, { commission: 0, funds: 0 });
  const standbyBooks = new Postgres(standby.url);
  await standbyBooks.sql("emisor", "select pg_wal_replay_pause()");
  try {
    expectOk(
      await call(t.app, "POST", "/v1/cards/payment", {
        ...auth,
        body: {
          card_number: card.id,
          amount: 3,
          payment_description: "paused replica",
          latitude: 19.4,
          longitude: -99.1,
        },
      }),
    );
    const started = Date.now();
    const where = await routed(async () => {
      const movements = expectOk(
        await call<{ movements: { items: { description: string }[] } }>(
          t.app,
          "GET",
          `/v1/cards/${card.id}/movements`,
          auth,
        ),
      );
      assert.equal(movements.movements.items[0]?.description, "paused replica");
    });
    const waited = Date.now() - started;
    assert.deepEqual(where, { replica: 0, primary: 1 });
    assert.ok(waited >= limits.listingReplicaWaitMs - 50, `answered after ${waited} ms, before the bound`);
    assert.ok(waited < limits.listingReplicaWaitMs + 1500, `answered after ${waited} ms`);
    // The replica really had not replayed it: proof that the primary's answer was needed.
    const [position] = await standbyBooks.sql<{ lsn: string }>(
      "emisor",
      "select pg_last_wal_replay_lsn()::text as lsn",
    );
    const [now] = await new Postgres(primary.url).sql<{ lsn: string }>(
      "emisor",
      "select pg_current_wal_lsn()::text as lsn",
    );
    assert.ok(lsnValue(position?.lsn ?? "0/0") < lsnValue(now?.lsn ?? "0/0"));
  } finally {
    await standbyBooks.sql("emisor", "select pg_wal_replay_resume()");
  }
});

test("WAL positions compare as numbers, not as text", () => {
  assert.ok(lsnValue("10/0") > lsnValue("F/FFFFFFFF"));
  assert.equal(lsnValue("0/16B3748"), 0x16b3748n);
  assert.equal(lsnValue("1/0"), 1n << 32n);
});
