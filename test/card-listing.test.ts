// Proves GET /v1/cards: the assigned cards of the caller's subtree (never stock, never a sibling's
// or a parent's), newest assignment first, each filter, the keyset cursor (every card once while
// cards are assigned between pages, ties on the assignment time included; bound to its filters),
// and that every bad input is 1000 (or the named resource's not found), never 500.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { encodeCursor } from "../src/http/cursor.ts";
import { call, createSubClient, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import {
  type AssignedCard,
  assignCard,
  createCardholder,
  createProduct,
  mintStock,
  panOf,
} from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";

interface ListedCard {
  id: string;
  type: string;
  status: string;
  masked_card_number: string;
  last_four: string;
  expiration: string;
  balance: number;
  available: number;
  held: number;
  owed: number;
  product: { id: string; code: string; name: string };
  cardholder_id: string;
  client_id: string;
  account: { id: string; reference: string };
  assignation_date: string;
  activation_date: string | null;
}
interface CardPage {
  cards: { items: ListedCard[]; per_page: number; next_cursor: string | null };
}

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

const where = { latitude: 19.4326, longitude: -99.1332 };

function list(tenant: Tenant, query = "") {
  return call<CardPage>(t.app, "GET", `/v1/cards${query ? `?${query}` : ""}`, { token: tenant.token });
}

async function listOk(tenant: Tenant, query = "") {
  return expectOk(await list(tenant, query)).cards;
}

/** `count` cards of one new product of `owner`, for cardholders of `holderClient` (default owner). */
async function assignMany(owner: Tenant, count: number, stockLeft = 0): Promise<AssignedCard[]> {
  const product = await createProduct(t, owner);
  await mintStock(t, owner, product.id, count + stockLeft);
  const cards: AssignedCard[] = [];
  for (let i = 0; i < count; i++) {
    cards.push(await assignCard(t, owner, await createCardholder(t, owner), product.id));
  }
  return cards;
}

async function setStatus(tenant: Tenant, cardId: string, status: string) {
  expectOk(
    await call(t.app, "PUT", "/v1/cards/status", {
      token: tenant.token,
      body: { card_number: cardId, status, reason: "LOST", ...where },
    }),
  );
}

/** Every page of a listing, following next_cursor; `between` runs before each next page. */
async function walk(tenant: Tenant, query: string, between?: () => Promise<void>) {
  const seen: ListedCard[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 100; pages++) {
    const page: CardPage["cards"] = await listOk(
      tenant,
      [query, cursor ? `cursor=${cursor}` : ""].filter(Boolean).join("&"),
    );
    seen.push(...page.items);
    cursor = page.next_cursor;
    if (!cursor) return seen;
    await between?.();
  }
  throw new Error("the walk did not end");
}

test("lists the assigned cards newest first in the summary shape; stock is not listed; no number or CVV", async () => {
  const tenant = await createTenant(t, { available: 1000 });
  const cards = await assignMany(tenant, 3, 4);
  expectOk(
    await call(t.app, "POST", "/v1/cards/payment", {
      token: tenant.token,
      body: { card_number: cards[0]?.id, amount: 12.5, payment_description: "x", ...where },
    }),
  );
  const response = await list(tenant);
  const page = expectOk(response).cards;
  assert.deepEqual(
    page.items.map((card) => card.id),
    cards.map((card) => card.id).reverse(),
  );
  assert.equal(page.per_page, 50);
  assert.equal(page.next_cursor, null);
  const first = page.items.at(-1);
  const detail = expectOk(
    await call<{ card: Record<string, unknown> }>(t.app, "GET", `/v1/cards/${cards[0]?.id}`, {
      token: tenant.token,
    }),
  ).card;
  // The list's fields are getCard's (same values), less the PIN and cancellation details, plus client_id.
  assert.deepEqual(first, {
    id: detail.id,
    type: detail.type,
    status: detail.status,
    masked_card_number: detail.masked_card_number,
    last_four: detail.last_four,
    expiration: detail.expiration,
    balance: 12.5,
    available: 12.5,
    held: 0,
    owed: 0,
    product: detail.product,
    cardholder_id: detail.cardholder_id,
    client_id: tenant.clientId,
    account: detail.account,
    assignation_date: detail.assignation_date,
    activation_date: null,
  });
  assert.match(String(first?.masked_card_number), /^\*{12}[0-9]{4}$/);
  const text = JSON.stringify(response.body);
  for (const card of cards) assert.ok(!text.includes(await panOf(t, card.id)), "a card number in clear");
  assert.ok(!/cvv|pan_|pin_hash/i.test(text));
});

test("filters: status (one or several), cardholder_id, product_id, client_id; they combine", async () => {
  const tenant = await createTenant(t);
  const [active, blocked, canceled, fresh] = await assignMany(tenant, 4);
  assert.ok(active && blocked && canceled && fresh);
  for (const card of [active, blocked, canceled]) {
    expectOk(
      await call(t.app, "POST", "/v1/cards/activate", {
        token: tenant.token,
        body: { card_number: card.id, ...where },
      }),
    );
  }
  await setStatus(tenant, blocked.id, "TEMPORARY_INACTIVE");
  await setStatus(tenant, canceled.id, "CANCELED");
  const other = await assignMany(tenant, 2);
  const ids = async (query: string) => (await listOk(tenant, query)).items.map((card) => card.id);

  assert.deepEqual(await ids("status=TEMPORARY_INACTIVE"), [blocked.id]);
  assert.deepEqual(await ids("status=CANCELED"), [canceled.id]);
  assert.deepEqual(await ids("status=NEED_ACTIVATION"), [...other.map((c) => c.id).reverse(), fresh.id]);
  assert.deepEqual(await ids("status=CANCELED,TEMPORARY_INACTIVE"), [canceled.id, blocked.id]);
  assert.deepEqual(await ids("status=ACTIVE,ACTIVE"), [active.id]);
  assert.deepEqual(await ids(`cardholder_id=${blocked.cardholderId}`), [blocked.id]);
  assert.deepEqual(await ids(`product_id=${other[0]?.productId}`), other.map((c) => c.id).reverse());
  assert.deepEqual(await ids(`product_id=${active.productId}&status=ACTIVE,CANCELED`), [
    canceled.id,
    active.id,
  ]);
  assert.deepEqual(
    await ids(`product_id=${active.productId}&status=ACTIVE&cardholder_id=${blocked.cardholderId}`),
    [],
  );
  assert.equal((await ids(`client_id=${tenant.clientId}`)).length, 6);
  // A cardholder of the subtree without cards: an empty list.
  assert.deepEqual(await ids(`cardholder_id=${await createCardholder(t, tenant)}`), []);
});

test("tenancy: a parent lists its sub-clients' cards; a sub-client never its parent's or sibling's", async () => {
  const root = await createTenant(t, { available: 100 });
  const subB = await createSubClient(t, root);
  const subC = await createSubClient(t, root);
  const mine = await assignMany(root, 1);
  const ofB = await assignMany(subB, 2);
  const ofC = await assignMany(subC, 1);
  // A card of the root's product, assigned by the root to B's cardholder, belongs to B.
  const product = await createProduct(t, root);
  await mintStock(t, root, product.id, 1);
  const givenToB = await assignCard(t, root, await createCardholder(t, root, subB.clientId), product.id);
  const ids = async (tenant: Tenant, query = "") =>
    (await listOk(tenant, query)).items.map((card) => card.id).sort();
  const sorted = (cards: AssignedCard[]) => cards.map((card) => card.id).sort();

  assert.deepEqual(await ids(root), sorted([...mine, ...ofB, ...ofC, givenToB]));
  assert.deepEqual(await ids(subB), sorted([...ofB, givenToB]));
  assert.deepEqual(await ids(subC), sorted(ofC));
  assert.deepEqual(await ids(root, `client_id=${subB.clientId}`), sorted([...ofB, givenToB]));
  assert.deepEqual(await ids(root, `product_id=${ofB[0]?.productId}`), sorted(ofB));
  assert.deepEqual(await ids(root, `cardholder_id=${givenToB.cardholderId}`), [givenToB.id]);
  assert.deepEqual(await ids(subB, `product_id=${product.id}`), [givenToB.id]);
  const listed = (await listOk(root, `client_id=${subB.clientId}`)).items;
  assert.ok(listed.every((card) => card.client_id === subB.clientId));

  // Naming what is outside one's subtree is that resource's not found, as GET /v1/events does.
  for (const [actor, query, code] of [
    [subB, `client_id=${root.clientId}`, 3101],
    [subB, `client_id=${subC.clientId}`, 3101],
    [subB, `client_id=${randomUUID()}`, 3101],
    [subB, `cardholder_id=${ofC[0]?.cardholderId}`, 3201],
    [subB, `cardholder_id=${mine[0]?.cardholderId}`, 3201],
    [subB, `cardholder_id=${randomUUID()}`, 3201],
    [subB, `product_id=${ofC[0]?.productId}`, 3301],
    [subB, `product_id=${mine[0]?.productId}`, 3301],
    [subB, `product_id=${randomUUID()}`, 3301],
  ] as const) {
    expectError(await list(actor, query), code, 404);
  }
});

test("a cursor walk gives every card once while cards are assigned between pages, ties included", async () => {
  const tenant = await createTenant(t);
  const cards = await assignMany(tenant, 7);
  // Four cards assigned in the same microsecond: the id orders them, and no page loses one.
  await t.ctx.db
    .updateTable("cards")
    .set({ assigned_at: new Date("2026-01-15T12:00:00.123Z") })
    .where(
      "id",
      "in",
      cards.slice(2, 6).map((card) => card.id),
    )
    .execute();
  const product = await createProduct(t, tenant);
  await mintStock(t, tenant, product.id, 10);
  const added: string[] = [];
  const seen = await walk(tenant, "per_page=2", async () => {
    added.push((await assignCard(t, tenant, await createCardholder(t, tenant), product.id)).id);
  });
  const ids = seen.map((card) => card.id);
  assert.equal(new Set(ids).size, ids.length, "a card given twice");
  assert.deepEqual([...ids].sort(), cards.map((card) => card.id).sort(), "not every card, or a new one");
  assert.ok(added.length >= 3);
  // The order is the listing's: assignation_date descending, then id descending.
  const keys = seen.map((card) => `${card.assignation_date} ${card.id}`);
  assert.deepEqual(keys, [...keys].sort().reverse());
  // A new walk starts with the cards assigned meanwhile.
  const first = await listOk(tenant, "per_page=2");
  assert.deepEqual(
    first.items.map((card) => card.id),
    added.slice(-2).reverse(),
  );
  // per_page=1 down to the last card, and a filtered walk.
  assert.equal((await walk(tenant, "per_page=1")).length, cards.length + added.length);
  assert.deepEqual(
    (await walk(tenant, `per_page=1&product_id=${product.id}`)).map((card) => card.id),
    [...added].reverse(),
  );
});

test("a cursor is bound to its filters and per_page; a malformed or forged one is 1000 on cursor", async () => {
  const tenant = await createTenant(t);
  const cards = await assignMany(tenant, 3);
  const page = await listOk(tenant, "per_page=1&status=NEED_ACTIVATION,ACTIVE");
  const cursor = page.next_cursor;
  assert.ok(cursor);
  // The same listing (statuses in another order, repeated) continues it.
  assert.deepEqual(
    (await listOk(tenant, `per_page=1&status=ACTIVE,NEED_ACTIVATION,ACTIVE&cursor=${cursor}`)).items.map(
      (card) => card.id,
    ),
    [cards[1]?.id],
  );
  for (const query of [
    `per_page=2&status=NEED_ACTIVATION,ACTIVE`,
    `per_page=1`,
    `per_page=1&status=NEED_ACTIVATION`,
    `per_page=1&status=NEED_ACTIVATION,ACTIVE&client_id=${tenant.clientId}`,
    `per_page=1&status=NEED_ACTIVATION,ACTIVE&product_id=${cards[0]?.productId}`,
    `per_page=1&status=NEED_ACTIVATION,ACTIVE&cardholder_id=${cards[0]?.cardholderId}`,
  ]) {
    const response = expectError(await list(tenant, `${query}&cursor=${cursor}`), 1000, 400);
    assert.equal((response.body.data as { details: Array<{ field: string }> }).details[0]?.field, "cursor");
  }
  // Another client's cursor is another listing too.
  const other = await createTenant(t);
  expectError(await list(other, `per_page=1&status=NEED_ACTIVATION,ACTIVE&cursor=${cursor}`), 1000, 400);

  const listing = [tenant.clientId, "", "", "", "", 50];
  const forged = (position: Record<string, string | number>) => encodeCursor(position, listing);
  for (const bad of [
    "garbage!",
    "e30",
    forged({}),
    forged({ t: "2026-02-30T00:00:00.000000Z", i: randomUUID() }),
    forged({ t: "2026-01-01T25:00:00.000000Z", i: randomUUID() }),
    forged({ t: "0000-01-01T00:00:00.000000Z", i: randomUUID() }),
    forged({ t: "2026-01-01T00:00:00.000Z", i: randomUUID() }),
    forged({ t: "2026-01-01T00:00:00.000000Z", i: "not-a-uuid" }),
    forged({ t: "2026-01-01T00:00:00.000000Z", i: 5 }),
    "x".repeat(201),
  ]) {
    const response = expectError(await list(tenant, `cursor=${bad}`), 1000, 400);
    assert.equal(
      (response.body.data as { details: Array<{ field: string }> }).details[0]?.field,
      "cursor",
      bad,
    );
  }
  // A well-formed position is read as one: nothing was assigned before 2000.
  const old = await listOk(tenant, `cursor=${forged({ t: "2000-01-01T00:00:00.000000Z", i: randomUUID() })}`);
  assert.deepEqual(old.items, []);
});

test("invalid filters and paging are 1000 naming the field", async () => {
  const tenant = await createTenant(t);
  for (const [query, field] of [
    ["status=FOO", "status"],
    ["status=NOT_ASSIGNED", "status"],
    ["status=active", "status"],
    ["status=", "status"],
    ["status=ACTIVE,", "status"],
    ["cardholder_id=123", "cardholder_id"],
    ["product_id=", "product_id"],
    ["client_id=x", "client_id"],
    ["per_page=0", "per_page"],
    ["per_page=101", "per_page"],
    ["per_page=abc", "per_page"],
    ["cursor=", "cursor"],
    ["page=2", "page"],
    ["limit=5", "limit"],
  ]) {
    const response = expectError(await list(tenant, query), 1000, 400);
    const details = (response.body.data as { details: Array<{ field: string }> }).details;
    assert.ok(
      details.some((detail) => detail.field === field),
      `${query}: ${JSON.stringify(details)}`,
    );
  }
  expectError(await call(t.app, "GET", "/v1/cards"), 2001, 401);
});
