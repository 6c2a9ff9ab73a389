// Proves that every listing read by page number reaches its first rows only (page x per_page at most
// limits.pageWindowRowsMax): the last page within works, the next is 1000 on page, and a cursor reads on.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { mexicoCityToday } from "../src/domain/spei.ts";
import { limits } from "../src/limits.ts";
import { call, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { cardsFor } from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";

let t: TestApp;
let tenant: Tenant;
let cardId: string;
// The operation date of a transfer received now: the calendar day in Mexico City, not in UTC.
const today = mexicoCityToday();

before(async () => {
  t = await startTestApp();
  tenant = await createTenant(t, { available: 100 });
  const [card] = await cardsFor(t, tenant, 1, { activate: true });
  assert.ok(card);
  cardId = card.id;
  for (const amount of [1, 2]) {
    const where = { latitude: 19.4326, longitude: -99.1332 };
    const body = { card_number: cardId, amount, payment_description: "fondeo", ...where };
    expectOk(await call(t.app, "POST", "/v1/cards/payment", { token: tenant.token, body }));
    expectOk(
      await call(t.app, "POST", "/v1/sandbox/spei/incoming", {
        token: tenant.token,
        body: { clabe: tenant.clabe, amount },
      }),
    );
  }
});
after(() => t.close());

/** Every listing that takes `page`: its URL (with any query it requires) and whether it has a cursor. */
const listings = () => [
  { path: "/v1/cards/{id}/movements", url: `/v1/cards/${cardId}/movements?`, cursor: true },
  {
    path: "/v1/transfer/clabe/collection/{clabe}/operations",
    url: `/v1/transfer/clabe/collection/${tenant.clabe}/operations?init_date=${today}&end_date=${today}&`,
    cursor: true,
  },
  { path: "/v1/clients", url: "/v1/clients?", cursor: false },
  { path: "/v1/products", url: "/v1/products?", cursor: false },
  { path: "/v1/webhooks", url: "/v1/webhooks?", cursor: false },
];

test("the table names every operation of the OpenAPI document that takes page", async () => {
  const spec = (await t.app.inject({ url: "/openapi.json" })).json() as {
    paths: Record<string, Record<string, { parameters?: Array<{ name: string; in: string }> }>>;
  };
  const paged = Object.entries(spec.paths)
    .filter(([, operations]) =>
      Object.values(operations).some((op) =>
        op.parameters?.some((p) => p.in === "query" && p.name === "page"),
      ),
    )
    .map(([path]) => path)
    .sort();
  assert.deepEqual(
    paged,
    listings()
      .map((listing) => listing.path)
      .sort(),
  );
});

test("the last page within the window answers; the next is 1000 on page, pointing to the cursor or stating the bound", async () => {
  const window = limits.pageWindowRowsMax;
  for (const listing of listings()) {
    for (const perPage of [undefined, 1, 3, limits.pageSizeMax]) {
      const size = perPage ?? limits.pageSizeDefault;
      const last = Math.floor(window / size);
      const query = perPage === undefined ? "" : `per_page=${perPage}&`;
      const within = await call(t.app, "GET", `${listing.url}${query}page=${last}`, { token: tenant.token });
      expectOk(within);
      for (const page of [last + 1, limits.pageNumberMax]) {
        const url = `${listing.url}${query}page=${page}`;
        const past = expectError(await call(t.app, "GET", url, { token: tenant.token }), 1000, 400);
        assert.deepEqual(
          (past.body.data as { details: Array<{ field: string; rule: string }> }).details.map(
            (detail) => `${detail.field}:${detail.rule}`,
          ),
          ["page:maximum"],
          url,
        );
        assert.match(past.body.message, new RegExp(`^page: must be at most ${last} with per_page ${size}: `));
        assert.match(past.body.message, /first 10,000 rows/);
        assert.equal(/next_cursor/.test(past.body.message), listing.cursor, past.body.message);
      }
    }
  }
});

test("a cursor reads past the window: it wins over page", async () => {
  for (const listing of listings().filter((l) => l.cursor)) {
    const first = expectOk(
      await call<Record<string, unknown>>(t.app, "GET", `${listing.url}per_page=1`, { token: tenant.token }),
    );
    const cursor = JSON.stringify(first).match(/"next_cursor":"([^"]+)"/)?.[1];
    assert.ok(cursor, JSON.stringify(first));
    const url = `${listing.url}per_page=1&page=${limits.pageWindowRowsMax + 1}&cursor=${cursor}`;
    expectOk(await call(t.app, "GET", url, { token: tenant.token }));
  }
});
