// Proves card assignment (every rule, shipping addresses, concurrency on the last cards), the card
// lifecycle (each transition legal and illegal), PINs, and card_number as UUID or ciphered PAN.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { balanceOf } from "../src/ledger/ledger.ts";
import { call, createSubClient, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import {
  assignBody,
  assignCard,
  cardsFor,
  createCardholder,
  createProduct,
  mintStock,
  panOf,
} from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { opensslDecrypt, opensslEncrypt, opensslKeyPair, toUrlSafe } from "./helpers/openssl.ts";
import { cardholderBody } from "./helpers/people.ts";

let t: TestApp;
let tenant: Tenant;
before(async () => {
  t = await startTestApp();
  tenant = await createTenant(t);
});
after(() => t.close());

const where = { latitude: 19.4326, longitude: -99.1332 };
const put = (token: string, body: unknown) => call(t.app, "PUT", "/v1/cards", { token, body });

async function shipmentOf(cardId: string) {
  return t.ctx.db.selectFrom("card_shipments").selectAll().where("card_id", "=", cardId).executeTakeFirst();
}

test("assignment answers the 4.5 shape and the card shows NEED_ACTIVATION with a B2B shipment", async () => {
  const product = await createProduct(t, tenant);
  await mintStock(t, tenant, product.id, 1);
  const cardholderId = await createCardholder(t, tenant);
  const response = await put(
    tenant.token,
    assignBody(cardholderId, product.id, { delivery_type: "EXPRESS" }),
  );
  const data = expectOk(response) as Record<string, Record<string, unknown>>;
  assert.deepEqual(Object.keys(data).sort(), ["account", "card", "cardholder", "product"]);
  assert.deepEqual(Object.keys(data.cardholder ?? {}).sort(), [
    "curp",
    "first_name",
    "id",
    "rfc",
    "second_name",
    "second_surname",
    "surname",
  ]);
  assert.deepEqual(Object.keys(data.card ?? {}).sort(), [
    "assignation_timestamp",
    "id",
    "last_four",
    "status",
    "type",
  ]);
  assert.deepEqual(Object.keys(data.account ?? {}).sort(), [
    "assignation_timestamp",
    "clabe",
    "id",
    "reference",
  ]);
  assert.deepEqual(data.product, { id: product.id, code: product.code, name: product.name });
  assert.equal(data.card?.status, "NEED_ACTIVATION");
  assert.equal(data.card?.type, "PHYSICAL");
  assert.equal(data.cardholder?.id, cardholderId);
  assert.match(String(data.account?.reference), /^[0-9]+$/);
  assert.equal(data.account?.clabe, null);
  const shipment = await shipmentOf(String(data.card?.id));
  assert.equal(shipment?.shipping_method, "B2B");
  assert.equal(shipment?.delivery_type, "EXPRESS");
  assert.equal((shipment?.address as { street?: string } | undefined)?.street, "Av. Reforma");
  const stock = expectOk(
    await call<{ products: { detail: Array<{ stock_cards: number }> } }>(
      t.app,
      "GET",
      `/v1/products/${product.id}`,
      { token: tenant.token },
    ),
  );
  assert.equal(stock.products.detail[0]?.stock_cards, 0);
});

test("shipping: B2C uses the client's address (none on file is 5310); CUSTOM needs and uses delivery_address", async () => {
  const product = await createProduct(t, tenant);
  await mintStock(t, tenant, product.id, 3);
  const cardholderId = await createCardholder(t, tenant);
  expectError(
    await put(tenant.token, assignBody(cardholderId, product.id, { shipping_method: "B2C" })),
    5310,
    422,
  );
  // A virtual card is not shipped: B2C without an address on file, or CUSTOM without one, is
  // fine (they were 5310 and 1000, so a root client, which has no address, could not assign one).
  const virtual = await createProduct(t, tenant, { card_type: "VIRTUAL" });
  await mintStock(t, tenant, virtual.id, 2);
  for (const shipping_method of ["B2C", "CUSTOM"]) {
    const assigned = expectOk(
      await put(tenant.token, assignBody(cardholderId, virtual.id, { shipping_method })),
    ) as { card: { id: string; status: string } };
    assert.equal(assigned.card.status, "ACTIVE");
    assert.equal(await shipmentOf(assigned.card.id), undefined);
  }
  await t.ctx.db
    .updateTable("clients")
    .set({
      street: "Insurgentes",
      ext_street_number: "10",
      suburb: "Roma",
      township: "Cuauhtémoc",
      city: "CDMX",
      state: "CDMX",
      postal_code: "06700",
    })
    .where("id", "=", tenant.clientId)
    .execute();
  const b2c = expectOk(
    await put(tenant.token, assignBody(cardholderId, product.id, { shipping_method: "B2C" })),
  ) as { card: { id: string } };
  assert.equal(
    ((await shipmentOf(b2c.card.id))?.address as { street?: string } | undefined)?.street,
    "Insurgentes",
  );

  expectError(
    await put(tenant.token, assignBody(cardholderId, product.id, { shipping_method: "CUSTOM" })),
    1000,
    400,
  );
  const address = {
    state: "JALISCO",
    township: "Zapopan",
    city: "Guadalajara",
    suburb: "Centro",
    street: "Juárez",
    ext_street_number: "5",
    int_street_number: "2B",
    postal_code: "45100",
  };
  expectError(
    await put(
      tenant.token,
      assignBody(cardholderId, product.id, {
        shipping_method: "CUSTOM",
        delivery_address: { ...address, state: "ATLANTIS" },
      }),
    ),
    1000,
    400,
  );
  expectError(
    await put(
      tenant.token,
      assignBody(cardholderId, product.id, {
        shipping_method: "CUSTOM",
        delivery_address: { ...address, postal_code: "4510" },
      }),
    ),
    1000,
    400,
  );
  const custom = expectOk(
    await put(
      tenant.token,
      assignBody(cardholderId, product.id, { shipping_method: "CUSTOM", delivery_address: address }),
    ),
  ) as { card: { id: string } };
  assert.deepEqual((await shipmentOf(custom.card.id))?.address, address);
});

test("assignment validates every field and its scope", async () => {
  const product = await createProduct(t, tenant);
  await mintStock(t, tenant, product.id, 2);
  const cardholderId = await createCardholder(t, tenant);
  const invalid: Array<[Record<string, unknown>, string]> = [
    [{ document_type: "LICENCIA" }, "document_type"],
    [{ document_number: "" }, "document_number"],
    [{ document_number: "x".repeat(28) }, "document_number"],
    [{ observations: "o".repeat(101) }, "observations"],
    [{ shipping_method: "DRONE" }, "shipping_method"],
    [{ delivery_type: "SAME_DAY" }, "delivery_type"],
    [{ cardholder_id: "nope" }, "cardholder_id"],
    [{ extra: 1 }, "extra"],
  ];
  for (const [override, field] of invalid) {
    const response = expectError(
      await put(tenant.token, assignBody(cardholderId, product.id, override)),
      1000,
      400,
    );
    assert.ok(
      (response.body.data as { details: Array<{ field: string }> }).details.some((d) => d.field === field),
      field,
    );
  }
  // delivery_address is required (contract 4.5: "object or null", required): null, not absent.
  const { delivery_address: _, ...withoutAddress } = assignBody(cardholderId, product.id);
  const missing = expectError(await put(tenant.token, withoutAddress), 1000, 400);
  assert.equal(missing.body.message, "delivery_address: is required");
  // A union of literals names every allowed value, not the first (regression: 'must be "B2B"').
  const method = expectError(
    await put(tenant.token, assignBody(cardholderId, product.id, { shipping_method: "DRONE" })),
    1000,
    400,
  );
  assert.deepEqual((method.body.data as { details: unknown[] }).details, [
    { field: "shipping_method", rule: "enum", message: 'must be one of "B2B", "B2C", "CUSTOM"' },
  ]);
  expectOk(
    await put(
      tenant.token,
      assignBody(cardholderId, product.id, {
        document_number: "x".repeat(27),
        observations: "o".repeat(100),
      }),
    ),
  );
  const stranger = await createTenant(t);
  const theirCardholder = await createCardholder(t, stranger);
  expectError(await put(tenant.token, assignBody(theirCardholder, product.id)), 3201, 404);
  expectError(await put(tenant.token, assignBody(randomUUID(), product.id)), 3201, 404);
  const theirProduct = await createProduct(t, stranger);
  expectError(await put(tenant.token, assignBody(cardholderId, theirProduct.id)), 3301, 404);
  await t.ctx.db.updateTable("products").set({ status: "INACTIVE" }).where("id", "=", product.id).execute();
  expectError(await put(tenant.token, assignBody(cardholderId, product.id)), 5301, 422);
});

test("empty stock is 5302; concurrent assignments of the last cards hand out each card once", async () => {
  const product = await createProduct(t, tenant);
  await mintStock(t, tenant, product.id, 3);
  const cardholders = await Promise.all(Array.from({ length: 8 }, () => createCardholder(t, tenant)));
  const responses = await Promise.all(cardholders.map((id) => put(tenant.token, assignBody(id, product.id))));
  const won = responses
    .filter((r) => r.status === 200)
    .map((r) => (r.body.data as { card: { id: string } }).card.id);
  assert.equal(won.length, 3);
  assert.equal(new Set(won).size, 3);
  for (const r of responses.filter((r) => r.status !== 200)) expectError(r, 5302, 422);
});

test("a card held by a retry that will roll back is waited for, not taken for empty stock (5302 stored as final)", async () => {
  // Regression (concurrency audit, PostgreSQL): two copies of one keyed assignment each locked a
  // card; a third assignment skipped both locked cards, found nothing and stored 5302 as its key's
  // final answer while a card was still there. Several rounds: the race is one of timing.
  for (let round = 0; round < 4; round++) {
    const product = await createProduct(t, tenant);
    await mintStock(t, tenant, product.id, 2);
    const [first, second] = await Promise.all([createCardholder(t, tenant), createCardholder(t, tenant)]);
    const keyed = (cardholder: string, key: string) =>
      call(t.app, "PUT", "/v1/cards", {
        token: tenant.token,
        body: assignBody(cardholder, product.id),
        headers: { "idempotency-key": key },
      });
    const key = randomUUID();
    const answers = await Promise.all([
      keyed(first as string, key),
      keyed(first as string, key),
      keyed(second as string, `${key}-b`),
    ]);
    for (const answer of answers) expectOk(answer);
    const after = expectOk(
      await call(t.app, "GET", `/v1/products/${product.id}`, { token: tenant.token }),
    ) as {
      products: { detail: Array<{ stock_cards: number }> };
    };
    assert.equal(after.products.detail[0]?.stock_cards, 0, `round ${round}`);
  }
});

test("a parent assigns to its sub-client's cardholder; the sub-client sees the card, a sibling does not", async () => {
  const sub = await createSubClient(t, tenant);
  const sibling = await createSubClient(t, tenant);
  const [card] = await cardsFor(t, tenant, 1, { clientId: sub.clientId });
  assert.ok(card);
  expectOk(await call(t.app, "GET", `/v1/cards/${card.id}`, { token: sub.token }));
  expectOk(await call(t.app, "GET", `/v1/cards/${card.id}`, { token: tenant.token }));
  expectError(await call(t.app, "GET", `/v1/cards/${card.id}`, { token: sibling.token }), 3302, 404);
  // A sub-client cannot use its parent's cardholder.
  const parentCardholder = await createCardholder(t, tenant);
  const product = await createProduct(t, sub);
  await mintStock(t, sub, product.id, 1);
  expectError(await put(sub.token, assignBody(parentCardholder, product.id)), 3201, 404);
});

test("a virtual card starts ACTIVE and is not shipped", async () => {
  const product = await createProduct(t, tenant, { card_type: "VIRTUAL" });
  await mintStock(t, tenant, product.id, 1);
  const card = await assignCard(t, tenant, await createCardholder(t, tenant), product.id);
  const got = expectOk(
    await call<{ card: { status: string; type: string } }>(t.app, "GET", `/v1/cards/${card.id}`, {
      token: tenant.token,
    }),
  );
  assert.equal(got.card.status, "ACTIVE");
  assert.equal(got.card.type, "VIRTUAL");
  assert.equal(await shipmentOf(card.id), undefined);
});

test("lifecycle: activate once; block, unblock, cancel; every illegal transition has its code", async () => {
  const [card] = await cardsFor(t, tenant, 1);
  assert.ok(card);
  const status = (s: string, extra: Record<string, unknown> = {}) =>
    call(t.app, "PUT", "/v1/cards/status", {
      token: tenant.token,
      body: { card_number: card.id, status: s, ...where, ...extra },
    });
  const activate = () =>
    call(t.app, "POST", "/v1/cards/activate", {
      token: tenant.token,
      body: { card_number: card.id, ...where },
    });

  expectError(await status("ACTIVE"), 5305, 422); // activation is its own operation
  expectError(await status("TEMPORARY_INACTIVE"), 5305, 422);
  expectError(
    await call(t.app, "PUT", "/v1/cards/pin", {
      token: tenant.token,
      body: { card_number: card.id, pin: "x" },
    }),
    5307,
    422,
  );
  const activated = expectOk(await activate()) as { card: { status: string; activation_date: string } };
  assert.equal(activated.card.status, "ACTIVE");
  expectError(await activate(), 5303, 422);
  expectError(await status("ACTIVE"), 5306, 422);
  const blocked = expectOk(await status("TEMPORARY_INACTIVE", { reason: "LOST" })) as Record<string, unknown>;
  assert.equal((blocked.card as { status: string }).status, "TEMPORARY_INACTIVE");
  assert.equal(blocked.previous_status, "ACTIVE");
  assert.equal(blocked.reason, "LOST");
  assert.equal(blocked.cancellation_timestamp, null);
  expectError(await activate(), 5305, 422);
  expectOk(await status("ACTIVE"));
  const canceled = expectOk(await status("CANCELED", { reason: "STOLEN" })) as {
    cancellation_timestamp: string;
  };
  assert.ok(!Number.isNaN(Date.parse(canceled.cancellation_timestamp)));
  for (const next of ["ACTIVE", "TEMPORARY_INACTIVE", "CANCELED"]) expectError(await status(next), 5304, 422);
  expectError(await activate(), 5304, 422);
  const detail = expectOk(
    await call<{ card: Record<string, unknown> }>(t.app, "GET", `/v1/cards/${card.id}`, {
      token: tenant.token,
    }),
  );
  assert.equal(detail.card.status, "CANCELED");
  assert.equal(detail.card.status_reason, "STOLEN");
  const history = await t.ctx.db
    .selectFrom("card_status_history")
    .select(["from_status", "to_status"])
    .where("card_id", "=", card.id)
    .orderBy("id")
    .execute();
  assert.deepEqual(
    history.map((h) => `${h.from_status}>${h.to_status}`),
    [
      "NOT_ASSIGNED>NEED_ACTIVATION",
      "NEED_ACTIVATION>ACTIVE",
      "ACTIVE>TEMPORARY_INACTIVE",
      "TEMPORARY_INACTIVE>ACTIVE",
      "ACTIVE>CANCELED",
    ],
  );
  // A NEED_ACTIVATION card may be canceled directly.
  const [fresh] = await cardsFor(t, tenant, 1);
  expectOk(
    await call(t.app, "PUT", "/v1/cards/status", {
      token: tenant.token,
      body: { card_number: fresh?.id, status: "CANCELED", ...where },
    }),
  );
  // Bad input.
  expectError(await status("LOST"), 1000, 400);
  expectError(
    await call(t.app, "PUT", "/v1/cards/status", {
      token: tenant.token,
      body: { card_number: card.id, status: "ACTIVE", latitude: 90.000001, longitude: 0 },
    }),
    1000,
    400,
  );
  expectError(
    await call(t.app, "PUT", "/v1/cards/status", {
      token: tenant.token,
      body: { card_number: card.id, status: "ACTIVE", latitude: 91, longitude: 0 },
    }),
    1000,
    400,
  );
});

test("card_number: UUID, ciphered PAN (openssl, standard and URL-safe Base64); clear PAN 1301; garbage 1005", async () => {
  const [card] = await cardsFor(t, tenant, 1);
  assert.ok(card);
  const pan = await panOf(t, card.id);
  const cipher = opensslEncrypt(t.ctx.systemKey.publicKeyPem, pan);
  const activate = (card_number: string) =>
    call(t.app, "POST", "/v1/cards/activate", { token: tenant.token, body: { card_number, ...where } });
  expectError(await activate(pan), 1301, 400);
  expectError(
    await activate(`${pan.slice(0, 4)} ${pan.slice(4, 8)} ${pan.slice(8, 12)} ${pan.slice(12)}`),
    1301,
    400,
  );
  expectError(await activate("bm90IGEgY2lwaGVy"), 1005, 400);
  expectError(await activate(opensslEncrypt(t.ctx.systemKey.publicKeyPem, pan, "pkcs1")), 1005, 400);
  expectError(await activate(opensslEncrypt(t.ctx.systemKey.publicKeyPem, "hello")), 1000, 400);
  const ok = expectOk(await activate(toUrlSafe(cipher))) as { card: { id: string } };
  assert.equal(ok.card.id, card.id);
  expectError(await activate(cipher), 5303, 422);
  // Another tenant's card, named by its ciphered number or its UUID, does not exist for you.
  const stranger = await createTenant(t);
  const [theirs] = await cardsFor(t, stranger, 1);
  assert.ok(theirs);
  expectError(
    await activate(opensslEncrypt(t.ctx.systemKey.publicKeyPem, await panOf(t, theirs.id))),
    3302,
    404,
  );
  expectError(await activate(theirs.id), 3302, 404);
});

test("PIN: set ciphered on an ACTIVE card, hashed at rest; a clear or malformed PIN is refused", async () => {
  const [card] = await cardsFor(t, tenant, 1, { activate: true });
  assert.ok(card);
  const setPin = (pin: string) =>
    call(t.app, "PUT", "/v1/cards/pin", { token: tenant.token, body: { card_number: card.id, pin } });
  // A PIN in clear is named as such (it answered 1005, "could not be deciphered").
  const clear = expectError(await setPin("1234"), 1000, 400);
  assert.match(clear.body.message, /pin: must be ciphered/);
  expectError(await setPin(opensslEncrypt(t.ctx.systemKey.publicKeyPem, "123")), 1000, 400);
  expectError(await setPin(opensslEncrypt(t.ctx.systemKey.publicKeyPem, "1234567")), 1000, 400);
  expectError(await setPin(opensslEncrypt(t.ctx.systemKey.publicKeyPem, "12a4")), 1000, 400);
  const set = expectOk(await setPin(opensslEncrypt(t.ctx.systemKey.publicKeyPem, "4821"))) as {
    pin_set: boolean;
  };
  assert.equal(set.pin_set, true);
  const row = await t.ctx.db
    .selectFrom("cards")
    .select("pin_hash")
    .where("id", "=", card.id)
    .executeTakeFirstOrThrow();
  assert.match(row.pin_hash ?? "", /^pvv1\$/);
  assert.ok(!(row.pin_hash ?? "").includes("4821"));
  const detail = expectOk(
    await call<{ card: { pin_set: boolean } }>(t.app, "GET", `/v1/cards/${card.id}`, { token: tenant.token }),
  );
  assert.equal(detail.card.pin_set, true);
});

test("PIN: a card blocked or canceled while its new PIN is hashed is refused, never answered set", async () => {
  const pinHash = async (id: string) =>
    (await t.ctx.db.selectFrom("cards").select("pin_hash").where("id", "=", id).executeTakeFirstOrThrow())
      .pin_hash;
  for (const [status, code] of [
    ["TEMPORARY_INACTIVE", 5307],
    ["CANCELED", 5304],
  ] as const) {
    const [card] = await cardsFor(t, tenant, 1, { activate: true });
    assert.ok(card);
    const before = await pinHash(card.id);
    const setting = call(t.app, "PUT", "/v1/cards/pin", {
      token: tenant.token,
      body: { card_number: card.id, pin: opensslEncrypt(t.ctx.systemKey.publicKeyPem, "5005") },
    });
    // The PIN call reads the card, then deciphers the PIN; the change may land meanwhile.
    await new Promise((resolve) => setTimeout(resolve, 5));
    expectOk(
      await call(t.app, "PUT", "/v1/cards/status", {
        token: tenant.token,
        body: {
          card_number: card.id,
          status,
          ...where,
          ...(status === "CANCELED" ? { reason: "STOLEN" } : {}),
        },
      }),
    );
    const answer = await setting;
    if (answer.status === 200) assert.notEqual(await pinHash(card.id), before, "answered set, so it is set");
    else {
      expectError(answer, code, 422);
      assert.equal(await pinHash(card.id), before);
    }
  }
});

test("an expired card is not stock, and cannot be activated, paid, spent from or given a PIN (5314)", async () => {
  const owner = await createTenant(t, { available: 1000 });
  const expire = (ids: string[]) =>
    t.ctx.db.updateTable("cards").set({ expires_on: "2020-01-31" }).where("id", "in", ids).execute();
  // Stock: an expired card is neither counted nor assigned.
  const product = await createProduct(t, owner);
  await mintStock(t, owner, product.id, 1);
  const stock = await t.ctx.db
    .selectFrom("cards")
    .select("id")
    .where("product_id", "=", product.id)
    .execute();
  await expire(stock.map((card) => card.id));
  const view = expectOk(
    await call<{ products: { detail: Array<{ stock_cards: number }> } }>(
      t.app,
      "GET",
      `/v1/products/${product.id}`,
      {
        token: owner.token,
      },
    ),
  );
  assert.equal(view.products.detail[0]?.stock_cards, 0);
  const holder = await createCardholder(t, owner);
  expectError(await put(owner.token, assignBody(holder, product.id)), 5302, 422);
  // Assigned cards that expired: one waiting for activation, one active.
  const [waiting] = await cardsFor(t, owner, 1);
  const [active] = await cardsFor(t, owner, 1, { activate: true });
  assert.ok(waiting && active);
  await expire([waiting.id, active.id]);
  const activation = await call(t.app, "POST", "/v1/cards/activate", {
    token: owner.token,
    body: { card_number: waiting.id, ...where },
  });
  expectError(activation, 5314, 422);
  for (const card of [waiting, active]) {
    const paid = await call(t.app, "POST", "/v1/cards/payment", {
      token: owner.token,
      body: { card_number: card.id, amount: 10, payment_description: "fondeo", ...where },
    });
    expectError(paid, 5314, 422);
  }
  const pin = await call(t.app, "PUT", "/v1/cards/pin", {
    token: owner.token,
    body: { card_number: active.id, pin: opensslEncrypt(t.ctx.systemKey.publicKeyPem, "4821") },
  });
  expectError(pin, 5314, 422);
  const airtime = await call(t.app, "POST", "/v1/airtime/topup", {
    token: owner.token,
    body: { id: active.id, product_id: "TELCEL_50", phone_number: "5512345678", email: "a@example.com" },
  });
  expectError(airtime, 5314, 422);
  assert.equal(await balanceOf(t.ctx.db, active.id), 0n);
  // Blocking still works; unblocking back to ACTIVE does not (regression, audit: it did).
  const setStatus = (status: string) =>
    call(t.app, "PUT", "/v1/cards/status", {
      token: owner.token,
      body: { card_number: active.id, status, reason: "LOST", ...where },
    });
  expectOk(await setStatus("TEMPORARY_INACTIVE"));
  expectError(await setStatus("ACTIVE"), 5314, 422);
  expectOk(await setStatus("CANCELED"));
});

test("GET /v1/cards/{id}/sensitive_data: number, expiry and CVV ciphered under the caller's public key", async () => {
  const owner = await createTenant(t);
  const [card] = await cardsFor(t, owner, 1);
  assert.ok(card);
  const reveal = (who: Tenant, id = card.id) =>
    call<{ card: { id: string }; sensitive_data: string }>(t.app, "GET", `/v1/cards/${id}/sensitive_data`, {
      token: who.token,
    });
  // No public key registered yet: nothing to cipher under.
  expectError(await reveal(owner), 5101, 422);
  const pair = opensslKeyPair();
  expectOk(
    await call(t.app, "POST", "/v1/clients/api_key/public_key", {
      token: owner.token,
      body: { public_key: pair.publicPem },
    }),
  );
  const first = await reveal(owner);
  assert.equal(first.headers["cache-control"], "no-store");
  const answer = expectOk(first);
  assert.equal(answer.card.id, card.id);
  const pan = await panOf(t, card.id);
  assert.ok(!JSON.stringify(first.body).includes(pan));
  const data = JSON.parse(opensslDecrypt(pair, answer.sensitive_data)) as Record<string, string>;
  const detail = expectOk(
    await call<{ card: { expiration: string } }>(t.app, "GET", `/v1/cards/${card.id}`, {
      token: owner.token,
    }),
  );
  assert.deepEqual(Object.keys(data).sort(), ["card_number", "cvv", "expiration"]);
  assert.equal(data.card_number, pan);
  assert.equal(data.expiration, detail.card.expiration);
  assert.match(data.cvv ?? "", /^[0-9]{3}$/);
  // The CVV is the card's: the same at every call (the ciphertext is not).
  const again = expectOk(await reveal(owner));
  assert.notEqual(again.sensitive_data, answer.sensitive_data);
  assert.equal((JSON.parse(opensslDecrypt(pair, again.sensitive_data)) as { cvv: string }).cvv, data.cvv);
  // Nobody else's card, and not a canceled one.
  expectError(await reveal(tenant), 3302, 404);
  expectOk(
    await call(t.app, "PUT", "/v1/cards/status", {
      token: owner.token,
      body: { card_number: card.id, status: "CANCELED", reason: "STOLEN", ...where },
    }),
  );
  expectError(await reveal(owner), 5304, 422);
});

test("GET /v1/cards/{id}: masked number, expiry, balance; unknown id 404", async () => {
  const [card] = await cardsFor(t, tenant, 1);
  assert.ok(card);
  const detail = expectOk(
    await call<{ card: Record<string, unknown> }>(t.app, "GET", `/v1/cards/${card.id}`, {
      token: tenant.token,
    }),
  );
  assert.equal(detail.card.masked_card_number, `************${card.lastFour}`);
  assert.match(String(detail.card.expiration), /^[0-9]{2}\/[0-9]{2}$/);
  assert.equal(detail.card.balance, 0);
  assert.equal(detail.card.status, "NEED_ACTIVATION");
  const pan = await panOf(t, card.id);
  assert.ok(!JSON.stringify(detail).includes(pan));
  expectError(await call(t.app, "GET", `/v1/cards/${randomUUID()}`, { token: tenant.token }), 3302, 404);
});

test("after assignment the cardholder lookup shows the account and card in the 2.4/2.5 shapes", async () => {
  const product = await createProduct(t, tenant);
  await mintStock(t, tenant, product.id, 2);
  const cardholderId = await createCardholder(t, tenant);
  const empty = expectOk(
    await call<{ cardholder: { accounts: unknown[] } }>(t.app, "GET", `/v1/cardholders?id=${cardholderId}`, {
      token: tenant.token,
    }),
  );
  assert.deepEqual(empty.cardholder.accounts, []);
  const first = await assignCard(t, tenant, cardholderId, product.id);
  const second = await assignCard(t, tenant, cardholderId, product.id);
  expectOk(
    await call(t.app, "POST", "/v1/cards/activate", {
      token: tenant.token,
      body: { card_number: second.id, ...where },
    }),
  );
  type Account = Record<string, unknown> & { cards: Array<Record<string, unknown>> };
  const found = expectOk(
    await call<{ cardholder: { accounts: Account[] } }>(t.app, "GET", `/v1/cardholders?id=${cardholderId}`, {
      token: tenant.token,
    }),
  );
  const accounts = found.cardholder.accounts;
  assert.deepEqual(
    accounts.map((a) => a.id),
    [first.accountId, second.accountId],
  );
  const [a1, a2] = accounts;
  assert.ok(a1 && a2);
  assert.deepEqual(Object.keys(a1).sort(), [
    "account_number",
    "activation_date",
    "assigned_by",
    "cards",
    "creation_date",
    "document",
    "id",
    "status",
  ]);
  assert.equal(typeof a1.account_number, "number");
  assert.equal(a1.status, "ACTIVE");
  assert.equal(a1.assigned_by, tenant.apiKeyId);
  assert.deepEqual(a1.document, { type: "INE", number: "IDMEX1234567890" });
  assert.equal(a1.activation_date, null);
  assert.ok(!Number.isNaN(Date.parse(String(a2.activation_date))));
  const card = a1.cards[0];
  assert.ok(card);
  assert.deepEqual(Object.keys(card).sort(), [
    "assignation_date",
    "assigned_by",
    "id",
    "last_four",
    "status",
  ]);
  assert.equal(card.id, first.id);
  assert.equal(card.status, "NEED_ACTIVATION");
  assert.equal(card.last_four, first.lastFour);
  assert.deepEqual(Object.keys(card.assigned_by as object).sort(), ["alias", "description", "id", "name"]);
  assert.equal((card.assigned_by as { id: string }).id, tenant.apiKeyId);
  assert.equal(a2.cards[0]?.status, "ACTIVE");
});

test("a product allowing blank RFC or CURP lets its clients register cardholders without them", async () => {
  const owner = await createTenant(t);
  const sub = await createSubClient(t, owner);
  const body = (extra: Record<string, unknown>) => ({ ...cardholderBody(), ...extra });
  const register = (who: Tenant, b: Record<string, unknown>) =>
    call(t.app, "POST", "/v1/cardholders", { token: who.token, body: b });
  const withoutRfc = body({});
  delete withoutRfc.rfc;
  const withoutCurp = body({});
  delete withoutCurp.curp;
  expectError(await register(sub, withoutRfc), 1000, 400);
  const product = await createProduct(t, owner, { allow_blank_rfc: true });
  // A product of the parent, not assigned, already counts for the sub-client (an ancestor's product).
  expectOk(await register(sub, withoutRfc));
  expectError(await register(sub, withoutCurp), 1000, 400);
  await t.ctx.db.updateTable("products").set({ status: "INACTIVE" }).where("id", "=", product.id).execute();
  const another = body({});
  delete another.rfc;
  expectError(await register(sub, another), 1000, 400);
  const curpless = await createProduct(t, sub, { allow_blank_curp: true });
  assert.ok(curpless.id);
  expectOk(await register(sub, withoutCurp));
  const stranger = await createTenant(t);
  const strangerBody = body({});
  delete strangerBody.curp;
  expectError(await register(stranger, strangerBody), 1000, 400);
});

test("a card of a product that requires RFC or CURP is not assigned to a cardholder without it (5313)", async () => {
  // Regression (contract audit): a product allowing blank RFC let the cardholder in, and then a
  // product requiring it issued that cardholder a card.
  const owner = await createTenant(t);
  const lenient = await createProduct(t, owner, { allow_blank_rfc: true, allow_blank_curp: true });
  const strict = await createProduct(t, owner);
  const curpOnly = await createProduct(t, owner, { allow_blank_curp: true });
  for (const product of [lenient, strict, curpOnly]) await mintStock(t, owner, product.id, 1);
  const withoutBoth = cardholderBody();
  delete withoutBoth.rfc;
  delete withoutBoth.curp;
  const holder = expectOk(
    await call<{ cardholder: { id: string } }>(t.app, "POST", "/v1/cardholders", {
      token: owner.token,
      body: withoutBoth,
    }),
  ).cardholder.id;
  const refused = expectError(await put(owner.token, assignBody(holder, strict.id)), 5313, 422);
  assert.equal(refused.body.message, "The product requires the cardholder's rfc, which is blank");
  const curp = expectError(await put(owner.token, assignBody(holder, curpOnly.id)), 5313, 422);
  assert.equal(curp.body.message, "The product requires the cardholder's rfc, which is blank");
  // Nothing was taken from the strict product's stock.
  const stock = await t.ctx.db
    .selectFrom("cards")
    .select((eb) => eb.fn.countAll<string>().as("n"))
    .where("product_id", "=", strict.id)
    .where("status", "=", "NOT_ASSIGNED")
    .executeTakeFirstOrThrow();
  assert.equal(Number(stock.n), 1);
  const assigned = expectOk(
    await call<{ cardholder: { rfc: string | null; curp: string | null } }>(t.app, "PUT", "/v1/cards", {
      token: owner.token,
      body: assignBody(holder, lenient.id),
    }),
  );
  // Blank is null here as in the cardholder's own answers, not "" (regression: the two differed).
  assert.equal(assigned.cardholder.rfc, null);
  assert.equal(assigned.cardholder.curp, null);
});
