// Proves GET /v1/transfer/cards, the listing of transfers out: newest first in getTransfer's shape
// (a beneficiary's card masked), the subtree rule (a parent sees its sub-clients', a sub-client
// neither its parent's nor its sibling's), each filter, a cursor walk that gives every transfer
// once while new ones are created, a cursor bound to its filters, and 1000 for every bad input.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { sql } from "kysely";
import { buildClabe } from "../src/domain/clabe.ts";
import { errors } from "../src/errors.ts";
import { applySpeiStateChange } from "../src/modules/transfers/outgoing.ts";
import { call, createSubClient, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { spendableCard } from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { speiSimulator } from "./helpers/rails.ts";

interface Order {
  id: string;
  card_id: string | null;
  tracking_key: string;
  operation_date: string;
  status: string;
  created_at: string;
  beneficiary: { account: string; account_type: string };
}
interface Listing {
  transfers: Order[];
  per_page: number;
  next_cursor: string | null;
}

let t: TestApp;
let root: Tenant;
let subB: Tenant;
let subC: Tenant;
const cards: Record<string, string> = {};
const orders: Record<string, string[]> = { A: [], B: [], C: [] };

before(async () => {
  t = await startTestApp();
  speiSimulator(t).hold();
  root = await createTenant(t, { available: 100_000 });
  subB = await createSubClient(t, root, 10_000);
  subC = await createSubClient(t, root, 10_000);
  for (const [name, tenant] of [
    ["A", root],
    ["B", subB],
    ["C", subC],
  ] as const) {
    cards[name] = await readyCard(tenant);
    for (let i = 0; i < 2; i++) orders[name]?.push(await send(tenant, cards[name] ?? ""));
  }
});
after(() => t.close());

/** An ACTIVE card of `tenant` holding 1,000.00, PIN 4821, of a product without commission. */
async function readyCard(tenant: Tenant): Promise<string> {
  return (await spendableCard(t, tenant, { commission: 0, funds: 1000 })).id;
}

async function send(tenant: Tenant, cardId: string, account = buildClabe("012", "180", 1234567n)) {
  const data = expectOk(
    await call<{ transfer: { id: string } }>(t.app, "POST", "/v1/transfer/cards", {
      token: tenant.token,
      body: {
        card_number: cardId,
        payment_concept: "Pago de renta",
        beneficiary_account: account,
        beneficiary_institution: "40012",
        amount: 1,
        beneficiary_name: "Maria Lopez",
        numeric_reference: "1234567",
        beneficiary_rfc_curp: "ND",
        beneficiary_email: "maria@example.mx",
        pin: "4821",
      },
    }),
  );
  return data.transfer.id;
}

const list = (who: Tenant, query = "") =>
  call<Listing>(t.app, "GET", `/v1/transfer/cards${query ? `?${query}` : ""}`, { token: who.token });
const ids = async (who: Tenant, query = "") => expectOk(await list(who, query)).transfers.map((o) => o.id);
const sorted = (values: string[]) => [...values].sort();

test("newest first, each item as GET /v1/transfer/cards/{id} answers it, a card beneficiary masked", async () => {
  const cardBeneficiary = await send(root, cards.A ?? "", "4111111111111111");
  const listing = expectOk(await list(root, "per_page=100"));
  assert.equal(listing.per_page, 100);
  assert.equal(listing.next_cursor, null);
  const [first] = listing.transfers;
  assert.equal(first?.id, cardBeneficiary);
  assert.equal(first?.beneficiary.account, "************1111");
  assert.ok(!JSON.stringify(listing).includes("4111111111111111"), "a beneficiary's card number in clear");
  for (const item of listing.transfers) {
    const one = expectOk(
      await call<{ transfer: Order }>(t.app, "GET", `/v1/transfer/cards/${item.id}`, { token: root.token }),
    );
    assert.deepEqual(item, one.transfer);
  }
  const times = listing.transfers.map((o) => o.created_at);
  assert.deepEqual(times, [...times].sort().reverse(), "newest first");
  // The default page is 50.
  assert.equal(expectOk(await list(root)).per_page, 50);
});

test("a parent sees its sub-clients' transfers; a sub-client neither its parent's nor its sibling's", async () => {
  const all = await ids(root, "per_page=100");
  for (const id of [...(orders.A ?? []), ...(orders.B ?? []), ...(orders.C ?? [])])
    assert.ok(all.includes(id));
  assert.deepEqual(sorted(await ids(subB)), sorted(orders.B ?? []));
  assert.deepEqual(sorted(await ids(subC)), sorted(orders.C ?? []));
  assert.deepEqual(sorted(await ids(root, `client_id=${subB.clientId}`)), sorted(orders.B ?? []));
  assert.deepEqual(sorted(await ids(subB, `client_id=${subB.clientId}`)), sorted(orders.B ?? []));
  // Another tenant's client or card is not found, as on every route naming it.
  const clientNotFound = errors.clientNotFound.code;
  expectError(await list(subB, `client_id=${subC.clientId}`), clientNotFound, 404);
  expectError(await list(subB, `client_id=${root.clientId}`), clientNotFound, 404);
  expectError(await list(subB, "client_id=00000000-0000-4000-8000-000000000000"), clientNotFound, 404);
  expectError(await list(subB, `card_id=${cards.C}`), errors.cardNotFound.code, 404);
  expectError(await list(subB, `card_id=${cards.A}`), errors.cardNotFound.code, 404);
  // A stranger sees nothing of the tree.
  const stranger = await createTenant(t);
  assert.deepEqual(await ids(stranger), []);
  expectError(await list(stranger, `client_id=${root.clientId}`), clientNotFound, 404);
});

test("filters: card_id, status (one or several), created_from (inclusive) and created_to (exclusive)", async () => {
  assert.deepEqual(sorted(await ids(root, `card_id=${cards.B}`)), sorted(orders.B ?? []));
  assert.deepEqual(await ids(root, `card_id=${cards.B}&client_id=${subC.clientId}`), []);

  const [settled, returned] = orders.C ?? [];
  assert.ok(settled && returned);
  for (const [id, estado] of [
    [settled, "LIQUIDACION"],
    [returned, "DEVOLUCION"],
  ] as const) {
    const order = expectOk(await list(subC)).transfers.find((o) => o.id === id);
    assert.ok(order);
    await applySpeiStateChange(t.ctx.db, {
      trackingKey: order.tracking_key,
      operationDate: order.operation_date,
      estado,
      detalle: "",
      causaDevolucion: estado === "DEVOLUCION" ? "03" : undefined,
      tsLiquidacion: estado === "LIQUIDACION" ? new Date() : undefined,
    });
  }
  assert.deepEqual(await ids(root, "status=LIQUIDADA"), [settled]);
  assert.deepEqual(sorted(await ids(root, "status=LIQUIDADA,DEVUELTA")), sorted([settled, returned]));
  const pending = await ids(root, "status=PENDIENTE&per_page=100");
  assert.ok(!pending.includes(settled) && !pending.includes(returned));
  assert.ok(pending.includes(orders.B?.[0] ?? ""));
  assert.deepEqual(await ids(root, "status=CANCELADA"), []);

  const listed = expectOk(await list(subB)).transfers;
  const older = listed.at(-1);
  const newer = listed.at(0);
  assert.ok(older && newer && older.id !== newer.id);
  const from = (o: Order) => encodeURIComponent(o.created_at);
  assert.deepEqual(await ids(subB, `created_from=${from(newer)}`), [newer.id]);
  assert.deepEqual(await ids(subB, `created_to=${from(newer)}`), [older.id]);
  assert.deepEqual(await ids(subB, `created_from=${from(older)}&created_to=${from(newer)}`), [older.id]);
});

test("a cursor walk gives every transfer once, while transfers are created between pages", async () => {
  const tenant = await createTenant(t, { available: 10_000 });
  const card = await readyCard(tenant);
  const existing: string[] = [];
  for (let i = 0; i < 7; i++) existing.push(await send(tenant, card));
  // Three of them share one (earlier) creation time: the id orders them, and none is lost or repeated.
  await t.ctx.db
    .updateTable("spei_orders")
    .set({ created_at: new Date("2020-01-01T00:00:00.123Z") })
    .where("id", "in", existing.slice(2, 5))
    .execute();
  // And two others are microseconds apart within one millisecond, which a Date cannot hold.
  for (const [index, id] of existing.slice(5, 7).entries()) {
    await sql`update spei_orders set created_at = ${"2019-01-01T00:00:00.123Z"}::timestamptz + ${index + 1} * interval '1 microsecond'
      where id = ${id}`.execute(t.ctx.db);
  }
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const query: string = `per_page=2${cursor ? `&cursor=${cursor}` : ""}`;
    const page: Listing = expectOk(await list(tenant, query));
    assert.ok(page.transfers.length <= 2);
    seen.push(...page.transfers.map((o) => o.id));
    cursor = page.next_cursor;
    pages += 1;
    await send(tenant, card);
  } while (cursor && pages < 20);
  assert.equal(seen.length, new Set(seen).size, "a transfer listed twice");
  assert.deepEqual(sorted(seen), sorted(existing));
  assert.equal(pages, 4);
});

test("a cursor is bound to the filters and per_page it was returned with", async () => {
  const first = expectOk(await list(root, "per_page=1&status=PENDIENTE"));
  const cursor = first.next_cursor;
  assert.ok(cursor);
  // The same filters in another order or form read on.
  const next = expectOk(await list(root, `status=PENDIENTE,PENDIENTE&per_page=1&cursor=${cursor}`));
  assert.notEqual(next.transfers[0]?.id, first.transfers[0]?.id);
  for (const query of [
    `per_page=2&status=PENDIENTE&cursor=${cursor}`,
    `per_page=1&cursor=${cursor}`,
    `per_page=1&status=LIQUIDADA&cursor=${cursor}`,
    `per_page=1&status=PENDIENTE&client_id=${subB.clientId}&cursor=${cursor}`,
    `per_page=1&status=PENDIENTE&created_from=2020-01-01T00:00:00Z&cursor=${cursor}`,
  ]) {
    const response = expectError(await list(root, query), errors.validationFailed.code, 400);
    assert.match(JSON.stringify(response.body.data), /"field":"cursor"/, query);
  }
  // Another client's cursor is another listing too.
  expectError(
    await list(subB, `per_page=1&status=PENDIENTE&cursor=${cursor}`),
    errors.validationFailed.code,
    400,
  );
});

test("bad inputs are 1000 with the field named, never 500", async () => {
  const forged = (position: Record<string, unknown>) =>
    Buffer.from(JSON.stringify({ ...position, q: "x" }), "utf8").toString("base64url");
  const cases: Array<[string, string]> = [
    ["status=SETTLED", "status"],
    ["status=PENDIENTE,", "status"],
    ["status=pendiente", "status"],
    ["client_id=nope", "client_id"],
    ["card_id=urn:uuid:00000000-0000-4000-8000-000000000000", "card_id"],
    ["created_from=yesterday", "created_from"],
    ["created_to=2025-13-01T00:00:00Z", "created_to"],
    ["created_from=2025-05-02T00:00:00Z&created_to=2025-05-01T00:00:00Z", "created_to"],
    ["created_from=2025-05-01T00:00:00Z&created_to=2025-05-01T00:00:00Z", "created_to"],
    ["per_page=0", "per_page"],
    ["per_page=101", "per_page"],
    ["per_page=ten", "per_page"],
    ["cursor=", "cursor"],
    ["cursor=not-a-cursor!", "cursor"],
    ["cursor=bm90IGpzb24", "cursor"],
    [`cursor=${forged({ t: "2025-02-30T00:00:00.000000Z", i: "x" })}`, "cursor"],
    ["page=2", "page"],
  ];
  for (const [query, field] of cases) {
    const response = expectError(await list(root, query), errors.validationFailed.code, 400);
    assert.match(JSON.stringify(response.body.data), new RegExp(`"field":"${field}"`), query);
  }
});
