// Proves products and stock: the 2.6 shape, visibility (created or assigned), live stock counts,
// minting Luhn-valid unique card numbers that are encrypted at rest, and assignment to sub-clients.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { sql } from "kysely";
import { isLuhnValid } from "../src/domain/luhn.ts";
import { limits } from "../src/limits.ts";
import { call, createSubClient, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { createProduct, mintStock, type ProductView, panOf } from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";

let t: TestApp;
let tenant: Tenant;
before(async () => {
  t = await startTestApp();
  tenant = await createTenant(t);
});
after(() => t.close());

type Products = { products: { total: number; detail: ProductView[] } };

test("create: the contract 2.6 shape, country 484, coin 484 Peso mexicano (as airtime products), status ACTIVE, empty stock", async () => {
  const product = await createProduct(t, tenant, { allow_blank_rfc: true, transfer_commission: 7.5 });
  assert.deepEqual(Object.keys(product).sort(), [
    "affinity_group",
    "allow_blank_curp",
    "allow_blank_rfc",
    "bin",
    "card_validity_months",
    "code",
    "coin",
    "country",
    "description",
    "id",
    "name",
    "status",
    "stock_cards",
    "transfer_commission",
    "type",
  ]);
  assert.deepEqual(product.country, { code: "484", description: "México" });
  // One spelling for the currency, a card product's as an airtime product's (regression: card
  // products said "Peso mexicano (MXN)").
  assert.deepEqual(product.coin, { code: "484", description: "Peso mexicano" });
  const airtime = expectOk(
    await call<{ products: { detail: Array<{ coin: unknown }> } }>(t.app, "GET", "/v1/airtime/products", {
      token: tenant.token,
    }),
  );
  assert.deepEqual(airtime.products.detail[0]?.coin, product.coin);
  assert.deepEqual(product.type, { key: "PHYSICAL", value: "Física" });
  assert.deepEqual(product.status, { key: "ACTIVE", value: "Activo" });
  assert.equal(product.stock_cards, 0);
  assert.equal(product.allow_blank_rfc, true);
  assert.equal(product.allow_blank_curp, false);
  assert.equal(product.transfer_commission, 7.5);
  assert.match(product.code, /^P[0-9]{6}$/);
});

test("create: every field is validated", async () => {
  const base = { name: "X", description: "Y", card_type: "PHYSICAL", bin: "531122", affinity_group: "G" };
  const bad: Array<[Record<string, unknown>, string]> = [
    [{ ...base, bin: "12345" }, "bin"],
    [{ ...base, bin: "123456789" }, "bin"],
    [{ ...base, bin: "12345a" }, "bin"],
    [{ ...base, card_type: "PLASTIC" }, "card_type"],
    [{ ...base, name: "" }, "name"],
    [{ ...base, name: "n".repeat(51) }, "name"],
    // Regression (contract audit): spaces alone passed for required text.
    [{ ...base, name: "   " }, "name"],
    [{ ...base, affinity_group: "\t " }, "affinity_group"],
    [{ ...base, transfer_commission: 1.234 }, "transfer_commission"],
    [{ ...base, card_validity_months: 6 }, "card_validity_months"],
    [{ ...base, country: "840" }, "country"],
  ];
  for (const [body, field] of bad) {
    const response = expectError(
      await call(t.app, "POST", "/v1/products", { token: tenant.token, body }),
      1000,
      400,
    );
    const details = (response.body.data as { details: Array<{ field: string }> }).details;
    assert.ok(
      details.some((d) => d.field === field),
      `${field}: ${JSON.stringify(details)}`,
    );
  }
  expectOk(
    await call(t.app, "POST", "/v1/products", { token: tenant.token, body: { ...base, bin: "12345678" } }),
  );
});

test("stock: minted cards are Luhn-valid, unique, from the BIN, and never stored in clear", async () => {
  const product = await createProduct(t, tenant, { bin: "411111" });
  await mintStock(t, tenant, product.id, 300);
  const got = expectOk(
    await call<Products>(t.app, "GET", `/v1/products/${product.id}`, { token: tenant.token }),
  );
  assert.equal(got.products.detail[0]?.stock_cards, 300);
  const cards = await t.ctx.db
    .selectFrom("cards")
    .select(["id", "last_four", "status"])
    .where("product_id", "=", product.id)
    .execute();
  assert.equal(cards.length, 300);
  const pans = await Promise.all(cards.map((card) => panOf(t, card.id)));
  assert.equal(new Set(pans).size, 300);
  for (const [i, pan] of pans.entries()) {
    assert.ok(isLuhnValid(pan) && pan.length === 16 && pan.startsWith("411111"), pan);
    assert.equal(cards[i]?.last_four, pan.slice(-4));
    assert.equal(cards[i]?.status, "NOT_ASSIGNED");
  }
  // No card number appears anywhere in the table's text.
  const dump = await sql<{
    row: string;
  }>`select c::text as row from cards c where product_id = ${product.id}`.execute(t.ctx.db);
  const text = dump.rows.map((r) => r.row).join("\n");
  for (const pan of pans) assert.ok(!text.includes(pan), "a PAN is stored in clear");
});

test("stock: quantity bounds, only the creator mints, idempotent", async () => {
  const product = await createProduct(t, tenant);
  for (const quantity of [0, limits.stockMintMax + 1, 1.5, "3"]) {
    expectError(
      await call(t.app, "POST", `/v1/products/${product.id}/stock`, {
        token: tenant.token,
        body: { quantity },
      }),
      1000,
      400,
    );
  }
  const headers = { "idempotency-key": `mint-${product.id}` };
  expectOk(
    await call(t.app, "POST", `/v1/products/${product.id}/stock`, {
      token: tenant.token,
      body: { quantity: 2 },
      headers,
    }),
  );
  expectOk(
    await call(t.app, "POST", `/v1/products/${product.id}/stock`, {
      token: tenant.token,
      body: { quantity: 2 },
      headers,
    }),
  );
  const got = expectOk(
    await call<Products>(t.app, "GET", `/v1/products/${product.id}`, { token: tenant.token }),
  );
  assert.equal(got.products.detail[0]?.stock_cards, 2);
  const sub = await createSubClient(t, tenant);
  expectOk(
    await call(t.app, "PUT", `/v1/products/${product.id}/clients/${sub.clientId}`, { token: tenant.token }),
  );
  expectError(
    await call(t.app, "POST", `/v1/products/${product.id}/stock`, {
      token: sub.token,
      body: { quantity: 1 },
    }),
    5311,
    422,
  );
});

test("visibility: created or assigned only; a sibling's or unknown product is 404", async () => {
  const owner = await createTenant(t);
  const stranger = await createTenant(t);
  const product = await createProduct(t, owner);
  const sub = await createSubClient(t, owner);
  const otherSub = await createSubClient(t, owner);
  expectError(await call(t.app, "GET", `/v1/products/${product.id}`, { token: stranger.token }), 3301, 404);
  expectError(await call(t.app, "GET", `/v1/products/${product.id}`, { token: sub.token }), 3301, 404);
  expectError(await call(t.app, "GET", `/v1/products/${randomUUID()}`, { token: owner.token }), 3301, 404);
  expectError(await call(t.app, "GET", "/v1/products/not-a-uuid", { token: owner.token }), 1000, 400);

  const assigned = expectOk(
    await call<{ client_id: string } & Products>(
      t.app,
      "PUT",
      `/v1/products/${product.id}/clients/${sub.clientId}`,
      {
        token: owner.token,
      },
    ),
  );
  assert.equal(assigned.client_id, sub.clientId);
  // Assigning again changes nothing.
  expectOk(
    await call(t.app, "PUT", `/v1/products/${product.id}/clients/${sub.clientId}`, { token: owner.token }),
  );
  const seen = expectOk(
    await call<Products>(t.app, "GET", `/v1/products/${product.id}`, { token: sub.token }),
  );
  assert.equal(seen.products.detail[0]?.id, product.id);
  const list = expectOk(await call<Products>(t.app, "GET", "/v1/products", { token: sub.token }));
  assert.deepEqual(
    list.products.detail.map((p) => p.id),
    [product.id],
  );
  assert.equal(list.products.total, 1);
  expectError(await call(t.app, "GET", `/v1/products/${product.id}`, { token: otherSub.token }), 3301, 404);

  // Only the creator assigns, only to its own subtree, never to itself.
  expectError(
    await call(t.app, "PUT", `/v1/products/${product.id}/clients/${otherSub.clientId}`, { token: sub.token }),
    5311,
    422,
  );
  expectError(
    await call(t.app, "PUT", `/v1/products/${product.id}/clients/${stranger.clientId}`, {
      token: owner.token,
    }),
    3101,
    404,
  );
  expectError(
    await call(t.app, "PUT", `/v1/products/${product.id}/clients/${owner.clientId}`, { token: owner.token }),
    1000,
    400,
  );
  expectError(
    await call(t.app, "PUT", `/v1/products/${product.id}/clients/${sub.clientId}`, { token: stranger.token }),
    3301,
    404,
  );
});

test("list: paginated, total counts everything visible", async () => {
  const owner = await createTenant(t);
  for (let i = 0; i < 3; i++) await createProduct(t, owner, { name: `P${i}` });
  const first = expectOk(
    await call<Products>(t.app, "GET", "/v1/products?per_page=2", { token: owner.token }),
  );
  const second = expectOk(
    await call<Products>(t.app, "GET", "/v1/products?per_page=2&page=2", { token: owner.token }),
  );
  assert.equal(first.products.total, 3);
  assert.deepEqual(
    [...first.products.detail, ...second.products.detail].map((p) => p.name),
    ["P0", "P1", "P2"],
  );
  expectError(
    await call(t.app, "GET", `/v1/products?per_page=${limits.pageSizeMax + 1}`, { token: owner.token }),
    1000,
    400,
  );
});

test("stock: a BIN whose numbers are used up answers 5315 and mints nothing", async () => {
  const product = await createProduct(t, tenant);
  await mintStock(t, tenant, product.id, 3);
  // Every number drawn from now on is taken: the database skips each new card of this product, as
  // the unique fingerprint skips a number another product on the BIN already holds.
  const name = `taken_${product.id.replaceAll("-", "")}`;
  await sql
    .raw(
      `create function ${name}() returns trigger language plpgsql as $$
         begin if new.product_id = '${product.id}' then return null; end if; return new; end $$`,
    )
    .execute(t.ctx.db);
  await sql
    .raw(`create trigger ${name} before insert on cards for each row execute function ${name}()`)
    .execute(t.ctx.db);
  try {
    expectError(
      await call(t.app, "POST", `/v1/products/${product.id}/stock`, {
        token: tenant.token,
        body: { quantity: 5 },
      }),
      5315,
      422,
    );
  } finally {
    await sql.raw(`drop trigger ${name} on cards`).execute(t.ctx.db);
    await sql.raw(`drop function ${name}()`).execute(t.ctx.db);
  }
  const got = expectOk(
    await call<Products>(t.app, "GET", `/v1/products/${product.id}`, { token: tenant.token }),
  );
  assert.equal(got.products.detail[0]?.stock_cards, 3);
});
