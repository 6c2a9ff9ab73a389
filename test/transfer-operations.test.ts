// Proves the collection-account listing (4.8): every 2.8 field, newest first, date range and
// bounds, page/pages/total from the day counters, cursor paging that is stable under new
// arrivals, and tenancy (a parent sees a sub-client's CLABE; nobody else does).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { hashSecret } from "../src/crypto/secrets.ts";
import { createAccount } from "../src/ledger/ledger.ts";
import { limits } from "../src/limits.ts";
import { insertApiKey, insertClient } from "../src/modules/clients/repository.ts";
import { createCollectionAccount } from "../src/modules/transfers/service.ts";
import { call, createTenant, expectError, expectOk, login, type Tenant } from "./helpers/api.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";

let t: TestApp;
let tenant: Tenant;

interface Listing {
  client: {
    id: string;
    name: string;
    alias: string;
    clabe: string;
    transfer_operations: {
      items: Array<Record<string, unknown> & { clave_rastreo: string; fecha_operacion: string }>;
      page: number;
      per_page: number;
      pages: number;
      total: number;
      next_cursor: string | null;
    };
  };
}

// Transfers per operation day, in arrival order; 2025-03-02 has none.
const seed: Array<[string, number]> = [
  ["2025-03-03", 12],
  ["2025-03-01", 10],
  ["2025-03-05", 8],
];
/** Tracking keys newest first: days descending, later arrivals first within a day. */
let expected: string[] = [];

async function incoming(who: Tenant, clabe: string, date: string, key: string, amount = 1) {
  return expectOk(
    await call(t.app, "POST", "/v1/sandbox/spei/incoming", {
      token: who.token,
      body: { clabe, amount, operation_date: date, tracking_key: key },
    }),
  );
}

before(async () => {
  t = await startTestApp();
  tenant = await createTenant(t);
  const byDay = new Map<string, string[]>();
  let n = 0;
  for (const [date, count] of seed) {
    for (let i = 0; i < count; i++) {
      n += 1;
      const key = `LST${date.replace(/-/g, "")}N${String(n).padStart(3, "0")}`;
      await incoming(tenant, tenant.clabe, date, key, n);
      byDay.set(date, [...(byDay.get(date) ?? []), key]);
    }
  }
  expected = [...byDay.keys()]
    .sort()
    .reverse()
    .flatMap((date) => [...(byDay.get(date) ?? [])].reverse());
});
after(() => t.close());

const list = (who: Tenant, clabe: string, query: string) =>
  call<Listing>(t.app, "GET", `/v1/transfer/clabe/collection/${clabe}/operations?${query}`, {
    token: who.token,
  });

const march = "init_date=2025-03-01&end_date=2025-03-31";

test("every 2.8 field, with its type, and nothing else", async () => {
  const data = expectOk(await list(tenant, tenant.clabe, `${march}&per_page=1`));
  assert.deepEqual(Object.keys(data.client).sort(), ["alias", "clabe", "id", "name", "transfer_operations"]);
  assert.equal(data.client.id, tenant.clientId);
  assert.equal(data.client.clabe, tenant.clabe);
  const [item] = data.client.transfer_operations.items;
  assert.ok(item);
  const numbers = ["monto", "transfer_commission", "commission_charged", "iva_charged"];
  const fields = [
    "id",
    "transfer_id",
    "fecha_operacion",
    "institucion_ordenante",
    "institucion_beneficiaria",
    "clave_rastreo",
    "monto",
    "nombre_beneficiario",
    "tipo_cuenta_beneficiario",
    "cuenta_beneficiario",
    "rfc_curp_beneficiario",
    "concepto_pago",
    "referencia_numerica",
    "nombre_ordenante",
    "cuenta_ordenante",
    "rfc_curp_ordenante",
    "cambio_estado_detalle",
    "cambio_estado_causa_devolucion",
    "cambio_estado_estado",
    "email_beneficiario",
    "transfer_commission",
    "commission_charged",
    "iva_charged",
    "ts_liquidacion",
    "created_at",
  ];
  assert.deepEqual(Object.keys(item).sort(), [...fields].sort());
  for (const field of fields)
    assert.equal(typeof item[field], numbers.includes(field) ? "number" : "string", field);
  assert.equal(item.clave_rastreo, expected[0]);
  assert.equal(item.fecha_operacion, "2025-03-05");
  assert.equal(item.monto, 30);
  assert.equal(item.cuenta_beneficiario, tenant.clabe);
  assert.equal(item.tipo_cuenta_beneficiario, "40");
  assert.equal(item.institucion_beneficiaria, "90646");
  assert.equal(item.transfer_commission, 0);
  assert.match(String(item.ts_liquidacion), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
});

test("pages of 7 walk all 30 transfers newest first; page, pages and total agree; past the end is empty", async () => {
  const seen: string[] = [];
  for (let page = 1; page <= 5; page++) {
    const ops = expectOk(await list(tenant, tenant.clabe, `${march}&per_page=7&page=${page}`)).client
      .transfer_operations;
    assert.equal(ops.page, page);
    assert.equal(ops.per_page, 7);
    assert.equal(ops.pages, 5);
    assert.equal(ops.total, 30);
    assert.equal(ops.items.length, page < 5 ? 7 : 2);
    assert.equal(ops.next_cursor === null, page === 5);
    seen.push(...ops.items.map((i) => i.clave_rastreo));
  }
  assert.deepEqual(seen, expected);
  const past = expectOk(await list(tenant, tenant.clabe, `${march}&per_page=7&page=6`)).client
    .transfer_operations;
  assert.deepEqual(past, { items: [], page: 6, per_page: 7, pages: 5, total: 30, next_cursor: null });
  const defaults = expectOk(await list(tenant, tenant.clabe, march)).client.transfer_operations;
  assert.equal(defaults.per_page, limits.pageSizeDefault);
  assert.equal(defaults.page, 1);
  assert.equal(defaults.items.length, 30);
});

test("the date range filters by operation date, both ends inclusive", async () => {
  const count = async (query: string) =>
    expectOk(await list(tenant, tenant.clabe, query)).client.transfer_operations;
  assert.equal((await count("init_date=2025-03-03&end_date=2025-03-03")).total, 12);
  const empty = await count("init_date=2025-03-02&end_date=2025-03-02");
  assert.deepEqual(empty, { items: [], page: 1, per_page: 50, pages: 0, total: 0, next_cursor: null });
  const lateMarch = await count("init_date=2025-03-02&end_date=2025-03-05&per_page=100");
  assert.equal(lateMarch.total, 20);
  assert.ok(
    lateMarch.items.every((i) => i.fecha_operacion === "2025-03-03" || i.fecha_operacion === "2025-03-05"),
  );
  const middle = await count("init_date=2025-03-01&end_date=2025-03-03&per_page=5&page=3");
  assert.equal(middle.total, 22);
  assert.deepEqual(
    middle.items.map((i) => i.clave_rastreo),
    expected.filter((_, i) => i >= 8).slice(10, 15),
  );
});

test("bounds: dates required and real, init <= end, a range of at most 366 days, per_page 1-100, page >= 1", async () => {
  const bad = async (query: string, field: string) => {
    const response = expectError(await list(tenant, tenant.clabe, query), 1000, 400);
    const details = (response.body.data as { details: Array<{ field: string }> }).details;
    assert.ok(
      details.some((d) => d.field === field),
      `${query}: ${JSON.stringify(details)}`,
    );
  };
  await bad("end_date=2025-03-31", "init_date");
  await bad("init_date=2025-03-01", "end_date");
  await bad("init_date=2025-02-30&end_date=2025-03-31", "init_date");
  await bad("init_date=2025/03/01&end_date=2025-03-31", "init_date");
  await bad("init_date=2025-03-10&end_date=2025-03-09", "init_date");
  await bad("init_date=2024-01-01&end_date=2025-01-01", "end_date");
  expectOk(await list(tenant, tenant.clabe, "init_date=2024-01-02&end_date=2025-01-01"));
  await bad(`${march}&per_page=0`, "per_page");
  await bad(`${march}&per_page=${limits.pageSizeMax + 1}`, "per_page");
  expectOk(await list(tenant, tenant.clabe, `${march}&per_page=${limits.pageSizeMax}`));
  await bad(`${march}&page=0`, "page");
  await bad(`${march}&page=x`, "page");
  await bad(`${march}&cursor=not-a-cursor`, "cursor");
  await bad(`${march}&cursor=${Buffer.from('{"d":"x"}').toString("base64url")}`, "cursor");
  // Regression (contract audit): dates PostgreSQL cannot hold reached it and answered 500.
  await bad("init_date=0000-01-01&end_date=0000-01-31", "init_date");
  const real = expectOk(await list(tenant, tenant.clabe, `${march}&per_page=2`)).client.transfer_operations;
  const realCursor = JSON.parse(Buffer.from(real.next_cursor ?? "", "base64url").toString()) as object;
  for (const day of ["2026-02-30", "2026-13-45", "0000-00-00", "0000-01-01"]) {
    const forged = Buffer.from(JSON.stringify({ ...realCursor, d: day })).toString("base64url");
    await bad(`${march}&per_page=2&cursor=${forged}`, "cursor");
  }
  // A cursor continues the listing that returned it, not another one (it used to answer page 1's
  // items labelled page 2 when the dates changed).
  await bad(`init_date=2025-03-02&end_date=2025-03-31&per_page=2&cursor=${real.next_cursor}`, "cursor");
  await bad(`${march}&per_page=3&cursor=${real.next_cursor}`, "cursor");
  expectOk(await list(tenant, tenant.clabe, `${march}&per_page=2&cursor=${real.next_cursor}`));
  await bad(`${march}&sort=asc`, "sort");
  expectError(
    await call(t.app, "GET", `/v1/transfer/clabe/collection/123/operations?${march}`, {
      token: tenant.token,
    }),
    1000,
    400,
  );
});

test("cursor paging returns what page paging does, and stays put while new transfers arrive", async () => {
  const walk = async (perPage: number, onPage?: (n: number) => Promise<void>) => {
    const keys: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = `${march}&per_page=${perPage}${cursor ? `&cursor=${cursor}` : ""}`;
      const ops = expectOk(await list(tenant, tenant.clabe, query)).client.transfer_operations;
      pages += 1;
      assert.equal(ops.page, pages);
      keys.push(...ops.items.map((i) => i.clave_rastreo));
      cursor = ops.next_cursor;
      await onPage?.(pages);
    } while (cursor);
    return keys;
  };
  assert.deepEqual(await walk(7), expected);
  assert.deepEqual(await walk(30), expected);
  assert.deepEqual(await walk(1), expected);
  // A transfer arriving mid-walk (newest of all) does not shift the pages still to come.
  const keys = await walk(4, async (page) => {
    if (page === 2) await incoming(tenant, tenant.clabe, "2025-03-05", "LSTLATEARRIVAL", 99);
  });
  assert.deepEqual(keys, expected);
  const fresh = expectOk(await list(tenant, tenant.clabe, `${march}&per_page=1`)).client.transfer_operations;
  assert.equal(fresh.items[0]?.clave_rastreo, "LSTLATEARRIVAL");
  assert.equal(fresh.total, 31);
  expected = ["LSTLATEARRIVAL", ...expected];
});

test("tenancy: another tenant's CLABE is 404; a parent lists its sub-client's CLABE, not the reverse", async () => {
  const stranger = await createTenant(t);
  expectError(await list(stranger, tenant.clabe, march), 3501, 404);
  expectError(await list(tenant, stranger.clabe, march), 3501, 404);
  expectError(await list(tenant, "646180999999999990", march), 3501, 404);

  // A sub-client of `tenant`, built the way sub-client creation (another module) will.
  const childId = randomUUID();
  const child = await t.ctx.db.transaction().execute(async (tx) => {
    await insertClient(
      tx,
      { id: childId, name: "Child company", alias: "CHILD" },
      {
        id: tenant.clientId,
        root_id: tenant.clientId,
        lineage: [tenant.clientId],
      },
    );
    await createAccount(tx, { id: childId, kind: "CLIENT_MAIN", clientId: childId });
    return createCollectionAccount(tx, childId, t.config.clabeBankPrefix);
  });
  await incoming(tenant, child.clabe, "2025-03-04", "LSTCHILD1", 5);
  const seenByParent = expectOk(await list(tenant, child.clabe, march)).client;
  assert.equal(seenByParent.id, childId);
  assert.equal(seenByParent.transfer_operations.total, 1);
  // The child, logged in with its own key, sees its CLABE but not its parent's.
  const password = "child-password-123";
  const apiKey = `ek_child${randomUUID().slice(0, 8)}`;
  await insertApiKey(t.ctx.db, {
    id: randomUUID(),
    clientId: childId,
    key: apiKey,
    name: "child key",
    alias: "CHILD",
    description: null,
    passwordHash: await hashSecret(password),
  });
  const childTenant = { ...tenant, clientId: childId, token: await login(t.app, apiKey, password) };
  expectOk(await list(childTenant, child.clabe, march));
  expectError(await list(childTenant, tenant.clabe, march), 3501, 404);
});
