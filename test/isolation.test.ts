// Proves tenant isolation route by route: a root client A with two sub-clients B and C, each with
// real resources made through the API, and ONE matrix of every route that takes an identifier
// (path, query or body). A sub-client acting on its sibling's or its parent's resource is answered
// the resource's own "not found" code (never revealing it exists) and nothing changes; a parent
// acting on its sub-client's resources works where the contract allows. The matrix is checked
// against the app's routes: a new route taking an identifier fails this test until it is added
// (or exempted, with the reason).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { encryptFor } from "../src/crypto/rsa.ts";
import { buildClabe } from "../src/domain/clabe.ts";
import { mexicoCityToday } from "../src/domain/spei.ts";
import { errors } from "../src/errors.ts";
import { call, createSubClient, createTenant, expectOk, type Response, type Tenant } from "./helpers/api.ts";
import {
  assignBody,
  assignCard,
  createCardholder,
  createProduct,
  mintStock,
  panOf,
} from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { cardholderBody } from "./helpers/people.ts";
import { speiSimulator } from "./helpers/rails.ts";
import {
  changesBetween,
  documentedRoutes,
  fillPath,
  type RouteInfo,
  snapshot,
  tablesOf,
} from "./helpers/routes.ts";

const where = { latitude: 19.4326, longitude: -99.1332 };
const pin = "4821";
const telcel100 = "a1700000-0000-4000-8000-000000000100";

/** One client of the tree and everything it owns. */
interface Party {
  name: string;
  tenant: Tenant;
  productId: string;
  cardholderId: string;
  cardholderEmail: string;
  cardId: string;
  /** The card's number ciphered under the system key: the other form of card_number. */
  cipheredPan: string;
  webhookId: string;
  eventId: string;
  orderId: string;
  topupId: string;
  authorizationId: string;
  spendingControlId: string;
}

let t: TestApp;
let tables: string[];
let a: Party;
let b: Party;
let c: Party;

before(async () => {
  t = await startTestApp();
  speiSimulator(t).hold();
  tables = await tablesOf(t);
  const root = await createTenant(t, { available: 100_000 });
  const subB = await createSubClient(t, root, 10_000);
  const subC = await createSubClient(t, root, 10_000);
  a = await equip("A", root);
  b = await equip("B", subB);
  c = await equip("C", subC);
});
after(() => t.close());

/** Gives a client, through its own token, one of every resource a route can name. */
async function equip(name: string, tenant: Tenant): Promise<Party> {
  const auth = { token: tenant.token };
  const product = await createProduct(t, tenant, { transfer_commission: 0 });
  await mintStock(t, tenant, product.id, 2);
  const cardholderId = await createCardholder(t, tenant);
  const card = await assignCard(t, tenant, cardholderId, product.id);
  expectOk(
    await call(t.app, "POST", "/v1/cards/activate", { ...auth, body: { card_number: card.id, ...where } }),
  );
  expectOk(
    await call(t.app, "POST", "/v1/cards/payment", {
      ...auth,
      body: { card_number: card.id, amount: 1000, payment_description: "fondeo", ...where },
    }),
  );
  // Any RSA public key will do for its own sensitive data (only the matrix's reads use it).
  expectOk(
    await call(t.app, "POST", "/v1/clients/api_key/public_key", {
      ...auth,
      body: { public_key: t.ctx.systemKey.publicKeyPem },
    }),
  );
  const cipheredPin = encryptFor(t.ctx.systemKey.publicKeyPem, pin);
  expectOk(
    await call(t.app, "PUT", "/v1/cards/pin", { ...auth, body: { card_number: card.id, pin: cipheredPin } }),
  );
  const order = expectOk(
    await call<{ transfer: { id: string } }>(t.app, "POST", "/v1/transfer/cards", {
      ...auth,
      body: transferBody(card.id),
    }),
  ).transfer;
  const topup = expectOk(
    await call<{ topup: { id: string } }>(t.app, "POST", "/v1/airtime/topup", {
      ...auth,
      body: { product_id: telcel100, phone_number: "5512345678", email: "cliente@example.com" },
    }),
  ).topup;
  const authorization = expectOk(
    await call<{ authorization_id: string }>(t.app, "POST", "/v1/sandbox/cards/authorizations", {
      ...auth,
      body: { card_id: card.id, amount: 10, merchant },
    }),
  );
  const spendingControl = expectOk(
    await call<{ spending_control: { id: string } }>(t.app, "POST", "/v1/spending_controls", {
      ...auth,
      body: { scope: "CARD", target_id: card.id, type: "MAX_AMOUNT", amount: 5_000 },
    }),
  ).spending_control;
  const webhook = expectOk(
    await call<{ webhook: { id: string } }>(t.app, "POST", "/v1/webhooks", {
      ...auth,
      body: { url: `https://hooks.example.com/${name}` },
    }),
  ).webhook;
  const events = expectOk(
    await call<{ events: Array<{ id: string }> }>(t.app, "GET", "/v1/events", auth),
  ).events;
  const cardholder = expectOk(
    await call<{ cardholder: { email: string } }>(t.app, "GET", `/v1/cardholders?id=${cardholderId}`, auth),
  ).cardholder;
  const eventId = events[0]?.id;
  assert.ok(eventId, `${name} has no event`);
  return {
    name,
    tenant,
    productId: product.id,
    cardholderId,
    cardholderEmail: cardholder.email,
    cardId: card.id,
    cipheredPan: encryptFor(t.ctx.systemKey.publicKeyPem, await panOf(t, card.id)),
    webhookId: webhook.id,
    eventId,
    orderId: order.id,
    topupId: topup.id,
    authorizationId: authorization.authorization_id,
    spendingControlId: spendingControl.id,
  };
}

function transferBody(cardNumber: string) {
  return {
    card_number: cardNumber,
    payment_concept: "Pago de renta",
    beneficiary_account: buildClabe("012", "180", 1234567n),
    beneficiary_institution: "40012",
    amount: 10,
    beneficiary_name: "Maria Lopez",
    numeric_reference: "1234567",
    beneficiary_rfc_curp: "ND",
    beneficiary_email: "maria@example.mx",
    pin,
  };
}

// ---------------------------------------------------------------------------------------------
// The matrix

interface Attempt {
  /** What varies, when a route has several identifiers or forms (shown in failures). */
  variant: string;
  url: string;
  body?: unknown;
  /** The "not found" code of the resource the identifier names. */
  code: number;
}

/** How `actor` names `target`'s resource on one route: every identifier, every form of it. */
type Attempts = (actor: Party, target: Party) => Attempt[];

// Operation dates are calendar days in Mexico City.
const day = mexicoCityToday();

/** Both forms of card_number: the card's UUID and its ciphered number. */
function cardForms(
  target: Party,
  body: (cardNumber: string) => Record<string, unknown>,
  code = errors.cardNotFound.code,
): Array<Omit<Attempt, "url">> {
  return [
    { variant: "card UUID", body: body(target.cardId), code },
    { variant: "ciphered PAN", body: body(target.cipheredPan), code },
  ];
}

function onUrl(url: string, attempts: Array<Omit<Attempt, "url">>): Attempt[] {
  return attempts.map((attempt) => ({ ...attempt, url }));
}

const notFound = {
  client: errors.clientNotFound.code,
  cardholder: errors.cardholderNotFound.code,
  product: errors.productNotFound.code,
  card: errors.cardNotFound.code,
  clabe: errors.collectionAccountNotFound.code,
  order: errors.speiOrderNotFound.code,
  topup: errors.airtimeTopupNotFound.code,
  webhook: errors.webhookNotFound.code,
  event: errors.eventNotFound.code,
  authorization: errors.authorizationNotFound.code,
  spendingControl: errors.spendingControlNotFound.code,
};

const merchant = { name: "OXXO CENTRO", mcc: "5411" };

const one = (variant: string, url: string, code: number, body?: unknown): Attempt[] => [
  { variant, url, code, ...(body !== undefined ? { body } : {}) },
];

const matrix: Record<string, Attempts> = {
  "GET /v1/products/{id}": (_, x) => one("product", `/v1/products/${x.productId}`, notFound.product),
  "POST /v1/products/{id}/stock": (_, x) =>
    one("product", `/v1/products/${x.productId}/stock`, notFound.product, { quantity: 1 }),
  "PUT /v1/products/{id}/clients/{client_id}": (me, x) => [
    ...one("their product", `/v1/products/${x.productId}/clients/${x.tenant.clientId}`, notFound.product),
    ...one(
      "my product, their client",
      `/v1/products/${me.productId}/clients/${x.tenant.clientId}`,
      notFound.client,
    ),
  ],
  "PUT /v1/cards": (me, x) => [
    ...one("their cardholder", "/v1/cards", notFound.cardholder, assignBody(x.cardholderId, me.productId)),
    ...one("their product", "/v1/cards", notFound.product, assignBody(me.cardholderId, x.productId)),
  ],
  "POST /v1/cards/activate": (_, x) =>
    onUrl(
      "/v1/cards/activate",
      cardForms(x, (n) => ({ card_number: n, ...where })),
    ),
  "PUT /v1/cards/status": (_, x) =>
    onUrl(
      "/v1/cards/status",
      cardForms(x, (n) => ({ card_number: n, status: "TEMPORARY_INACTIVE", reason: "LOST", ...where })),
    ),
  "PUT /v1/cards/pin": (_, x) =>
    onUrl(
      "/v1/cards/pin",
      cardForms(x, (n) => ({ card_number: n, pin: encryptFor(t.ctx.systemKey.publicKeyPem, "1111") })),
    ),
  "GET /v1/cards": (_, x) => [
    ...one("client_id", `/v1/cards?client_id=${x.tenant.clientId}`, notFound.client),
    ...one("cardholder_id", `/v1/cards?cardholder_id=${x.cardholderId}`, notFound.cardholder),
    ...one("product_id", `/v1/cards?product_id=${x.productId}`, notFound.product),
  ],
  "GET /v1/cards/{id}": (_, x) => one("card", `/v1/cards/${x.cardId}`, notFound.card),
  "GET /v1/cards/{id}/movements": (_, x) => one("card", `/v1/cards/${x.cardId}/movements`, notFound.card),
  "GET /v1/cards/{id}/sensitive_data": (_, x) =>
    one("card", `/v1/cards/${x.cardId}/sensitive_data`, notFound.card),
  "POST /v1/cards/payment": (_, x) =>
    onUrl(
      "/v1/cards/payment",
      cardForms(x, (n) => ({ card_number: n, amount: 1, payment_description: "x", ...where })),
    ),
  "POST /v1/cards/unload": (_, x) =>
    onUrl(
      "/v1/cards/unload",
      cardForms(x, (n) => ({ card_number: n, amount: 1 })),
    ),
  "GET /v1/clients/{id}": (_, x) => one("client", `/v1/clients/${x.tenant.clientId}`, notFound.client),
  "PUT /v1/clients/{id}/status": (_, x) =>
    one("client", `/v1/clients/${x.tenant.clientId}/status`, notFound.client, { status: "DISABLED" }),
  "POST /v1/clients/transfers": (me, x) => [
    ...one("their client pays", "/v1/clients/transfers", notFound.client, {
      from_client_id: x.tenant.clientId,
      to_client_id: me.tenant.clientId,
      amount: 1,
    }),
    ...one("their client receives", "/v1/clients/transfers", notFound.client, {
      from_client_id: me.tenant.clientId,
      to_client_id: x.tenant.clientId,
      amount: 1,
    }),
  ],
  "GET /v1/clients/transfers": (_, x) =>
    one("client_id", `/v1/clients/transfers?client_id=${x.tenant.clientId}`, notFound.client),
  "POST /v1/cardholders": (_, x) =>
    one("client_id", "/v1/cardholders", notFound.client, {
      ...cardholderLike(),
      client_id: x.tenant.clientId,
    }),
  "GET /v1/cardholders": (_, x) => [
    ...one("id", `/v1/cardholders?id=${x.cardholderId}`, notFound.cardholder),
    ...one("email", `/v1/cardholders?email=${encodeURIComponent(x.cardholderEmail)}`, notFound.cardholder),
  ],
  "POST /v1/cardholders/search": (_, x) => [
    ...one("id", "/v1/cardholders/search", notFound.cardholder, { id: x.cardholderId }),
    ...one("email", "/v1/cardholders/search", notFound.cardholder, { email: x.cardholderEmail }),
  ],
  "GET /v1/events": (_, x) => one("client_id", `/v1/events?client_id=${x.tenant.clientId}`, notFound.client),
  "POST /v1/webhooks": (_, x) =>
    one("client_id", "/v1/webhooks", notFound.client, {
      url: "https://x.example.com/h",
      client_id: x.tenant.clientId,
    }),
  "GET /v1/webhooks": (_, x) =>
    one("client_id", `/v1/webhooks?client_id=${x.tenant.clientId}`, notFound.client),
  "GET /v1/webhooks/{id}": (_, x) => one("webhook", `/v1/webhooks/${x.webhookId}`, notFound.webhook),
  "DELETE /v1/webhooks/{id}": (_, x) => one("webhook", `/v1/webhooks/${x.webhookId}`, notFound.webhook),
  "POST /v1/webhooks/{id}/enable": (_, x) =>
    one("webhook", `/v1/webhooks/${x.webhookId}/enable`, notFound.webhook),
  "POST /v1/webhooks/{id}/rotate_secret": (_, x) =>
    one("webhook", `/v1/webhooks/${x.webhookId}/rotate_secret`, notFound.webhook),
  "POST /v1/webhooks/{id}/test": (_, x) =>
    one("webhook", `/v1/webhooks/${x.webhookId}/test`, notFound.webhook),
  "POST /v1/webhooks/{id}/replay": (me, x) => [
    ...one("their webhook", `/v1/webhooks/${x.webhookId}/replay`, notFound.webhook, { event_id: me.eventId }),
    ...one("my webhook, their event", `/v1/webhooks/${me.webhookId}/replay`, notFound.event, {
      event_id: x.eventId,
    }),
  ],
  "GET /v1/transfer/clabe/collection/{clabe}/operations": (_, x) =>
    one(
      "clabe",
      `/v1/transfer/clabe/collection/${x.tenant.clabe}/operations?init_date=${day}&end_date=${day}`,
      notFound.clabe,
    ),
  "POST /v1/transfer/cards": (_, x) => onUrl("/v1/transfer/cards", cardForms(x, transferBody)),
  "GET /v1/transfer/cards": (_, x) => [
    ...one("client_id", `/v1/transfer/cards?client_id=${x.tenant.clientId}`, notFound.client),
    ...one("card_id", `/v1/transfer/cards?card_id=${x.cardId}`, notFound.card),
  ],
  "GET /v1/transfer/cards/{id}": (_, x) => one("order", `/v1/transfer/cards/${x.orderId}`, notFound.order),
  "POST /v1/sandbox/spei/incoming": (_, x) =>
    one("clabe", "/v1/sandbox/spei/incoming", notFound.clabe, { clabe: x.tenant.clabe, amount: 10 }),
  "POST /v1/sandbox/spei/orders/{id}/return": (_, x) =>
    one("order", `/v1/sandbox/spei/orders/${x.orderId}/return`, notFound.order, { cause: "02" }),
  "GET /v1/airtime/topups/{id}": (_, x) => one("topup", `/v1/airtime/topups/${x.topupId}`, notFound.topup),
  "POST /v1/spending_controls": (_, x) => [
    ...one("card", "/v1/spending_controls", notFound.card, {
      scope: "CARD",
      target_id: x.cardId,
      type: "MAX_AMOUNT",
      amount: 1,
    }),
    ...one("cardholder", "/v1/spending_controls", notFound.cardholder, {
      scope: "CARDHOLDER",
      target_id: x.cardholderId,
      type: "MAX_AMOUNT",
      amount: 1,
    }),
    ...one("product", "/v1/spending_controls", notFound.product, {
      scope: "PRODUCT",
      target_id: x.productId,
      type: "MAX_AMOUNT",
      amount: 1,
    }),
    ...one("client", "/v1/spending_controls", notFound.client, {
      scope: "CLIENT",
      target_id: x.tenant.clientId,
      type: "MAX_AMOUNT",
      amount: 1,
    }),
  ],
  "GET /v1/spending_controls/{id}": (_, x) =>
    one("control", `/v1/spending_controls/${x.spendingControlId}`, notFound.spendingControl),
  "PUT /v1/spending_controls/{id}": (_, x) =>
    one("control", `/v1/spending_controls/${x.spendingControlId}`, notFound.spendingControl, {
      type: "MAX_AMOUNT",
      amount: 1,
    }),
  "DELETE /v1/spending_controls/{id}": (_, x) =>
    one("control", `/v1/spending_controls/${x.spendingControlId}`, notFound.spendingControl),
  "GET /v1/cards/{id}/spending_controls": (_, x) =>
    one("card", `/v1/cards/${x.cardId}/spending_controls`, notFound.card),
  "GET /v1/cards/{id}/authorizations": (_, x) =>
    one("card", `/v1/cards/${x.cardId}/authorizations`, notFound.card),
  "GET /v1/authorizations/{id}": (_, x) =>
    one("authorization", `/v1/authorizations/${x.authorizationId}`, notFound.authorization),
  "POST /v1/sandbox/cards/authorizations": (_, x) =>
    one("card", "/v1/sandbox/cards/authorizations", notFound.card, {
      card_id: x.cardId,
      amount: 1,
      merchant,
    }),
  "POST /v1/sandbox/cards/authorizations/{id}/advice": (_, x) =>
    one(
      "authorization",
      `/v1/sandbox/cards/authorizations/${x.authorizationId}/advice`,
      notFound.authorization,
      {
        amount: 1,
      },
    ),
  "POST /v1/sandbox/cards/authorizations/{id}/reverse": (_, x) =>
    one(
      "authorization",
      `/v1/sandbox/cards/authorizations/${x.authorizationId}/reverse`,
      notFound.authorization,
      {},
    ),
  "POST /v1/sandbox/cards/authorizations/{id}/clear": (_, x) =>
    one(
      "authorization",
      `/v1/sandbox/cards/authorizations/${x.authorizationId}/clear`,
      notFound.authorization,
      {},
    ),
  "POST /v1/sandbox/cards/authorizations/{id}/expire": (_, x) =>
    one(
      "authorization",
      `/v1/sandbox/cards/authorizations/${x.authorizationId}/expire`,
      notFound.authorization,
      {},
    ),
  "POST /v1/sandbox/cards/force_posts": (_, x) =>
    one("card", "/v1/sandbox/cards/force_posts", notFound.card, { card_id: x.cardId, amount: 1, merchant }),
  "POST /v1/sandbox/cards/refunds": (me, x) => [
    ...one("their card", "/v1/sandbox/cards/refunds", notFound.card, {
      card_id: x.cardId,
      amount: 1,
      merchant,
    }),
    ...one("my card, their authorization", "/v1/sandbox/cards/refunds", notFound.authorization, {
      card_id: me.cardId,
      amount: 1,
      merchant,
      authorization_id: x.authorizationId,
    }),
  ],
};

/**
 * Routes that take an identifier but not one of a tenant's resources. Each says why; anything
 * else that takes an identifier must be in the matrix.
 */
const exempt: Record<string, string> = {
  "POST /v1/airtime/topup": "product_id/id name the global airtime catalog, the same for every client",
  "POST /v1/rails/spei/incoming": "the rail's signed callback: no tenant calls it (signature tests cover it)",
  "POST /v1/rails/spei/order-state":
    "the rail's signed callback: no tenant calls it (signature tests cover it)",
  "POST /v1/rails/cards/messages":
    "the card processor's signed messages: no tenant calls it (signature tests cover it)",
  "GET /v1/spending_controls":
    "target_id only filters the controls the caller and its sub-clients set: another's id lists nothing",
};

/** Field names that identify a resource; external_id is the caller's own free reference. */
const identifierName = /^(id|[a-z_]+_id|clabe|card_number|CuentaBeneficiario|ClaveRastreo)$/;

function takesIdentifier(route: RouteInfo): boolean {
  if (route.pathParams.length > 0) return true;
  const names = [...route.queryParams.map((p) => p.name), ...Object.keys(route.body?.properties ?? {})];
  return names.some((name) => name !== "external_id" && identifierName.test(name));
}

/** A valid cardholder body with fresh identities, so that only the client_id can fail it. */
function cardholderLike() {
  return cardholderBody();
}

function methodOf(key: string): "GET" | "POST" | "PUT" | "DELETE" {
  return key.split(" ")[0] as "GET";
}

async function attempt(actor: Party, key: string, item: Attempt): Promise<Response> {
  return call(t.app, methodOf(key), item.url, {
    token: actor.tenant.token,
    ...(item.body !== undefined ? { body: item.body } : {}),
  });
}

test("every route that takes an identifier is in the isolation matrix (or exempted with a reason)", async () => {
  const routes = await documentedRoutes(t.app);
  const keys = new Set(routes.map((route) => route.key));
  const missing = routes
    .filter(takesIdentifier)
    .map((route) => route.key)
    .filter((key) => !(key in matrix) && !(key in exempt));
  assert.deepEqual(missing, [], "routes taking an identifier but absent from the matrix");
  // And the matrix names only real routes (a renamed route must not leave a dead entry).
  const stale = [...Object.keys(matrix), ...Object.keys(exempt)].filter((key) => !keys.has(key));
  assert.deepEqual(stale, [], "matrix entries for routes that do not exist");
  // Each entry fills its route's template (the URL it builds matches the route's path).
  for (const route of routes.filter((r) => r.key in matrix)) {
    const build = matrix[route.key];
    assert.ok(build);
    for (const item of build(b, c)) {
      const pattern = new RegExp(
        `^${fillPath(route.path.replace(/[.]/g, "\\."), paramsAsWildcards(route), false)}(\\?|$)`,
      );
      assert.match(item.url, pattern, `${route.key} (${item.variant}) builds ${item.url}`);
    }
  }
});

function paramsAsWildcards(route: RouteInfo): Record<string, string> {
  return Object.fromEntries(route.pathParams.map((param) => [param.name, "[^/?]+"]));
}

test("a sub-client acting on its sibling's or its parent's resource: the resource's 404, nothing changed", async () => {
  const pairs: Array<[Party, Party]> = [
    [b, c],
    [b, a],
    [c, b],
    [c, a],
  ];
  const failures: string[] = [];
  let checked = 0;
  for (const [key, build] of Object.entries(matrix)) {
    for (const [actor, target] of pairs) {
      for (const item of build(actor, target)) {
        const before = await snapshot(t, tables);
        const response = await attempt(actor, key, item);
        const changed = changesBetween(before, await snapshot(t, tables));
        const label = `${actor.name} on ${target.name}'s ${key} (${item.variant})`;
        if (response.status !== 404 || response.body.code !== item.code) {
          failures.push(
            `${label}: expected 404/${item.code}, got ${response.status} ${JSON.stringify(response.body).slice(0, 200)}`,
          );
        }
        if (changed.length > 0) failures.push(`${label}: changed ${changed.join(", ")}`);
        checked += 1;
      }
    }
  }
  assert.deepEqual(failures, []);
  assert.ok(checked >= Object.keys(matrix).length * pairs.length);
});

test("the same requests on one's own resources are not refused as not found (the matrix is not vacuous)", async () => {
  // Reads only: the writes would change the fixtures the other tests share.
  for (const [key, build] of Object.entries(matrix)) {
    if (methodOf(key) !== "GET") continue;
    for (const item of build(b, b)) {
      const response = await attempt(b, key, item);
      assert.equal(
        response.status,
        200,
        `B on its own ${key} (${item.variant}): ${JSON.stringify(response.body)}`,
      );
    }
  }
});

test("a parent acts on its sub-client's resources where the contract allows", async () => {
  const reads = [
    `/v1/clients/${b.tenant.clientId}`,
    `/v1/cards/${b.cardId}`,
    `/v1/cards/${b.cardId}/movements`,
    `/v1/cards?client_id=${b.tenant.clientId}`,
    `/v1/cards?cardholder_id=${b.cardholderId}&product_id=${b.productId}`,
    `/v1/cardholders?id=${b.cardholderId}`,
    `/v1/webhooks/${b.webhookId}`,
    `/v1/webhooks?client_id=${b.tenant.clientId}`,
    `/v1/events?client_id=${b.tenant.clientId}`,
    `/v1/transfer/cards/${b.orderId}`,
    `/v1/transfer/cards?client_id=${b.tenant.clientId}&card_id=${b.cardId}`,
    `/v1/airtime/topups/${b.topupId}`,
    `/v1/transfer/clabe/collection/${b.tenant.clabe}/operations?init_date=${day}&end_date=${day}`,
    `/v1/clients/transfers?client_id=${b.tenant.clientId}`,
  ];
  for (const url of reads) {
    const response = await call(t.app, "GET", url, { token: a.tenant.token });
    assert.equal(response.status, 200, `A reading ${url}: ${JSON.stringify(response.body)}`);
  }
  // Writes on a sub-client's behalf: a cardholder for it, a webhook for it, its card blocked.
  const cardholder = expectOk(
    await call<{ cardholder: { client_id: string } }>(t.app, "POST", "/v1/cardholders", {
      token: a.tenant.token,
      body: { ...cardholderLike(), client_id: c.tenant.clientId },
    }),
  ).cardholder;
  assert.equal(cardholder.client_id, c.tenant.clientId);
  expectOk(
    await call(t.app, "POST", "/v1/webhooks", {
      token: a.tenant.token,
      body: { url: "https://parent.example.com/for-c", client_id: c.tenant.clientId },
    }),
  );
  expectOk(
    await call(t.app, "PUT", "/v1/cards/status", {
      token: a.tenant.token,
      body: { card_number: c.cipheredPan, status: "TEMPORARY_INACTIVE", reason: "LOST", ...where },
    }),
  );
  // An unload of the sub-client's card by the parent: the money goes to the sub-client's balance.
  const unloaded = expectOk(
    await call<{ client: { id: string; available: number } }>(t.app, "POST", "/v1/cards/unload", {
      token: a.tenant.token,
      body: { card_number: b.cipheredPan, amount: 1 },
    }),
  );
  assert.equal(unloaded.client.id, b.tenant.clientId);
  // Money between its sub-clients' balances, either way.
  for (const [from, to] of [
    [b.tenant.clientId, c.tenant.clientId],
    [c.tenant.clientId, b.tenant.clientId],
  ]) {
    expectOk(
      await call(t.app, "POST", "/v1/clients/transfers", {
        token: a.tenant.token,
        body: { from_client_id: from, to_client_id: to, amount: 1 },
      }),
    );
  }
  // And a sub-client still never acts on its parent, even by a resource id it was shown.
  assert.equal(
    (await call(t.app, "GET", `/v1/clients/${a.tenant.clientId}`, { token: c.tenant.token })).status,
    404,
  );
});

test("a sub-client's lists never show its sibling's or its parent's resources", async () => {
  // The parent moves money between B and C: B sees it on its balance, but not C's id.
  expectOk(
    await call(t.app, "POST", "/v1/clients/transfers", {
      token: a.tenant.token,
      body: { from_client_id: b.tenant.clientId, to_client_id: c.tenant.clientId, amount: 1 },
    }),
  );
  const lists = [
    "/v1/clients/transfers",
    "/v1/products",
    "/v1/clients",
    "/v1/webhooks",
    "/v1/events",
    "/v1/transfer/clabe/collection",
    "/v1/cards",
    `/v1/cards/${b.cardId}/movements`,
    `/v1/transfer/clabe/collection/${b.tenant.clabe}/operations?init_date=${day}&end_date=${day}`,
  ];
  const foreign = (x: Party) => [
    x.productId,
    x.cardholderId,
    x.cardId,
    x.webhookId,
    x.eventId,
    x.orderId,
    x.topupId,
    x.tenant.clabe,
  ];
  // The parent's client id is B's parent_id, which B may see; its sibling's id it may not.
  const hidden = [...foreign(a), ...foreign(c), c.tenant.clientId];
  for (const url of lists) {
    const text = JSON.stringify(expectOk(await call(t.app, "GET", url, { token: b.tenant.token })));
    const leaked = hidden.filter((id) => text.includes(id));
    assert.deepEqual(leaked, [], `B's ${url} shows another client's resource`);
  }
});
