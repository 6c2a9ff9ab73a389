// Proves every event type end to end: each real operation writes its event in its own transaction
// (owner, type, data shaped like the API's own answer, no secret), a refused operation writes none,
// and the events reach a webhook receiver signed as the README says.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { sql } from "kysely";
import { encryptFor } from "../src/crypto/rsa.ts";
import { buildClabe } from "../src/domain/clabe.ts";
import { expirationOf } from "../src/modules/cards/expiry.ts";
import { cardVerificationValue } from "../src/modules/cards/sensitive.ts";
import { eventTypes } from "../src/modules/events/outbox.ts";
import { dispatchSpeiOrders } from "../src/modules/transfers/dispatcher.ts";
import type { WebhookWorker } from "../src/modules/webhooks/worker.ts";
import { call, createSubClient, createTenant, expectError, expectOk } from "./helpers/api.ts";
import { assignCard, cardsFor, createCardholder, createProduct, mintStock, panOf } from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { cardholderBody, subclientBody } from "./helpers/people.ts";
import { airtimeSimulator, speiSimulator } from "./helpers/rails.ts";
import { type Receiver, readmeVerifier, startReceiver, startWorker, waitFor } from "./helpers/webhooks.ts";

let t: TestApp;
let receiver: Receiver;
let worker: WebhookWorker;
before(async () => {
  t = await startTestApp();
  receiver = await startReceiver();
  worker = startWorker(t);
});
after(async () => {
  await worker.stop();
  await receiver.close();
  await t.close();
});

interface StoredEvent {
  id: string;
  type: string;
  client_id: string;
  data: Record<string, unknown>;
  created_at: Date;
}

async function eventsSince(seq: bigint): Promise<StoredEvent[]> {
  return t.ctx.db
    .selectFrom("events")
    .select(["id", "type", "client_id", "data", "created_at"])
    .where("seq", ">", seq)
    .orderBy("seq")
    .execute() as Promise<StoredEvent[]>;
}

async function lastSeq(): Promise<bigint> {
  const row = await t.ctx.db
    .selectFrom("events")
    .select((eb) => eb.fn.max("seq").as("seq"))
    .executeTakeFirst();
  return BigInt((row?.seq as bigint | null) ?? 0n);
}

/** Runs `operation` and returns the one event it wrote, checking its type and owner. */
async function oneEvent(
  type: string,
  owner: string,
  operation: () => Promise<unknown>,
): Promise<StoredEvent> {
  const before = await lastSeq();
  await operation();
  const written = (await eventsSince(before)).filter((e) => e.type === type);
  assert.equal(written.length, 1, `${type}: ${written.length} events`);
  const [event] = written;
  assert.ok(event);
  assert.equal(event.client_id, owner, `${type} belongs to the wrong client`);
  return event;
}

const where = { latitude: 19.4326, longitude: -99.1332 };

test("every event type: written with its change, shaped like the API's answer, delivered signed", async () => {
  const root = await createTenant(t, { available: 10_000 });
  const webhook = expectOk(
    await call<{ webhook: { id: string; secret: string } }>(t.app, "POST", "/v1/webhooks", {
      token: root.token,
      body: { url: `${receiver.url}/all`, include_subclients: true },
    }),
  ).webhook;
  const seen = new Map<string, StoredEvent>();
  const answers = new Map<string, unknown>();
  const record = (event: StoredEvent, answer: unknown) => {
    seen.set(event.type, event);
    answers.set(event.type, answer);
  };

  let subclient: Record<string, unknown> = {};
  record(
    await oneEvent("client.created", root.clientId, async () => {
      subclient = expectOk(
        await call<{ subclient: Record<string, unknown> }>(t.app, "POST", "/v1/clients", {
          token: root.token,
          body: subclientBody({ available: 100 }),
        }),
      ).subclient;
    }),
    subclient,
  );
  let transferAnswer: unknown;
  record(
    await oneEvent("client.transfer", root.clientId, async () => {
      transferAnswer = expectOk(
        await call(t.app, "POST", "/v1/clients/transfers", {
          token: root.token,
          body: {
            from_client_id: root.clientId,
            to_client_id: subclient.id,
            amount: 10,
            description: "Fondeo",
          },
        }),
      );
    }),
    transferAnswer,
  );
  // A side that is not the caller gets its own event: the money and its own balance only.
  const moveBetween = async (from: string, to: string, amount: number) =>
    expectOk(
      await call<{ transfer: Record<string, unknown>; from_available: number; to_available: number }>(
        t.app,
        "POST",
        "/v1/clients/transfers",
        { token: root.token, body: { from_client_id: from, to_client_id: to, amount } },
      ),
    );
  let moved: { transfer: Record<string, unknown>; from_available: number; to_available: number } = {
    transfer: {},
    from_available: 0,
    to_available: 0,
  };
  // The root is outside the sub-client's subtree: its id is null in the sub-client's view.
  const subView = (transfer: Record<string, unknown>, side: "from_client_id" | "to_client_id") => ({
    ...transfer,
    [side]: null,
    created_by_client_id: null,
  });
  // (record's second argument is read after the operation ran: arguments are evaluated in order.)
  record(
    await oneEvent("client.transfer.credited", String(subclient.id), async () => {
      moved = await moveBetween(root.clientId, String(subclient.id), 5);
    }),
    { transfer: subView(moved.transfer, "from_client_id"), available: moved.to_available },
  );
  record(
    await oneEvent("client.transfer.debited", String(subclient.id), async () => {
      moved = await moveBetween(String(subclient.id), root.clientId, 2);
    }),
    { transfer: subView(moved.transfer, "to_client_id"), available: moved.from_available },
  );
  // A payment onto a sub-client's card: the payer's card.payment, and the card's client's own.
  const [subCard] = await cardsFor(t, root, 1, { clientId: String(subclient.id), activate: true });
  let received: unknown;
  record(
    await oneEvent("card.payment.received", String(subclient.id), async () => {
      received = expectOk(
        await call(t.app, "POST", "/v1/cards/payment", {
          token: root.token,
          body: { card_number: subCard?.id, amount: 3, payment_description: "Viáticos", ...where },
        }),
      );
    }),
    received,
  );
  let statusAnswer: unknown;
  record(
    await oneEvent("client.status_changed", root.clientId, async () => {
      statusAnswer = expectOk(
        await call(t.app, "PUT", `/v1/clients/${String(subclient.id)}/status`, {
          token: root.token,
          body: { status: "DISABLED" },
        }),
      );
    }),
    statusAnswer,
  );
  let cardholder: Record<string, unknown> = {};
  record(
    await oneEvent("cardholder.created", root.clientId, async () => {
      cardholder = expectOk(
        await call<{ cardholder: Record<string, unknown> }>(t.app, "POST", "/v1/cardholders", {
          token: root.token,
          body: cardholderBody(),
        }),
      ).cardholder;
    }),
    cardholder,
  );
  const product = await createProduct(t, root, { transfer_commission: 5 });
  await mintStock(t, root, product.id, 1);
  let assigned: Record<string, unknown> = {};
  record(
    await oneEvent("card.assigned", root.clientId, async () => {
      assigned = expectOk(
        await call<Record<string, unknown>>(t.app, "PUT", "/v1/cards", {
          token: root.token,
          body: {
            cardholder_id: cardholder.id,
            product_id: product.id,
            document_type: "INE",
            document_number: "X1",
            observations: "",
            shipping_method: "B2B",
            delivery_type: "STANDARD",
            delivery_address: null,
          },
        }),
      );
    }),
    assigned,
  );
  const cardId = (assigned.card as { id: string }).id;
  const card = (path: string, body: Record<string, unknown>, method: "POST" | "PUT" = "POST") =>
    call<Record<string, unknown>>(t.app, method, path, {
      token: root.token,
      body: { card_number: cardId, ...body },
    });
  let answer: unknown;
  record(
    await oneEvent(
      "card.activated",
      root.clientId,
      async () => (answer = expectOk(await card("/v1/cards/activate", where))),
    ),
    answer,
  );
  record(
    await oneEvent(
      "card.payment",
      root.clientId,
      async () =>
        (answer = expectOk(
          await card("/v1/cards/payment", { amount: 500, payment_description: "Nómina", ...where }),
        )),
    ),
    answer,
  );
  record(
    await oneEvent(
      "card.unloaded",
      root.clientId,
      async () =>
        (answer = expectOk(await card("/v1/cards/unload", { amount: 100, description: "Reintegro" }))),
    ),
    answer,
  );
  expectOk(await card("/v1/cards/pin", { pin: encryptFor(t.ctx.systemKey.publicKeyPem, "4821") }, "PUT"));
  const transferBody = {
    payment_concept: "Renta",
    beneficiary_account: buildClabe("012", "180", 77n),
    beneficiary_institution: "40012",
    amount: 100,
    beneficiary_name: "Maria",
    numeric_reference: "1",
    beneficiary_rfc_curp: "ND",
    beneficiary_email: "m@example.mx",
    pin: "4821",
  };
  let sent: { transfer: { id: string } } = { transfer: { id: "" } };
  const created = await oneEvent("transfer.out.created", root.clientId, async () => {
    sent = expectOk(await card("/v1/transfer/cards", transferBody)) as typeof sent;
  });
  const order = async (id: string) =>
    expectOk(
      await call<{ transfer: unknown }>(t.app, "GET", `/v1/transfer/cards/${id}`, { token: root.token }),
    ).transfer;
  record(created, await order(sent.transfer.id));
  record(
    await oneEvent("transfer.out.settled", root.clientId, async () => {
      await dispatchSpeiOrders({ db: t.ctx.db, rail: t.ctx.rails.spei, vaultKey: t.ctx.keys.vault });
      await speiSimulator(t).flush();
    }),
    await order(sent.transfer.id),
  );
  const second = expectOk(await card("/v1/transfer/cards", { ...transferBody, amount: 10 })) as typeof sent;
  record(
    await oneEvent("transfer.out.returned", root.clientId, async () => {
      expectOk(
        await call(t.app, "POST", `/v1/sandbox/spei/orders/${second.transfer.id}/return`, {
          token: root.token,
          body: { cause: "01" },
        }),
      );
    }),
    await order(second.transfer.id),
  );
  record(
    await oneEvent("transfer.in.received", root.clientId, async () => {
      answer = expectOk(
        await call<{ transfer_operation: unknown }>(t.app, "POST", "/v1/sandbox/spei/incoming", {
          token: root.token,
          body: { clabe: root.clabe, amount: 250 },
        }),
      ).transfer_operation;
    }),
    answer,
  );
  // Card purchases, through the network simulator: each event's data is the authorization as
  // GET /v1/authorizations/{id} shows it right after the change, without its messages.
  const authorizationNow = async (id: string) => {
    const { messages: _messages, ...view } = expectOk(
      await call<{ authorization: { messages: unknown } }>(t.app, "GET", `/v1/authorizations/${id}`, {
        token: root.token,
      }),
    ).authorization;
    return view;
  };
  const shop = { name: "FARMACIA SAN PABLO", mcc: "5912" };
  let authorizationId = "";
  record(
    await oneEvent("card_authorization.created", root.clientId, async () => {
      authorizationId = expectOk(
        await call<{ authorization_id: string }>(t.app, "POST", "/v1/sandbox/cards/authorizations", {
          token: root.token,
          body: { card_id: cardId, amount: 20, merchant: shop },
        }),
      ).authorization_id;
      answer = await authorizationNow(authorizationId);
    }),
    answer,
  );
  const simulate = async (path: string, body: Record<string, unknown>) =>
    expectOk(await call(t.app, "POST", `/v1/sandbox/cards/${path}`, { token: root.token, body }));
  record(
    await oneEvent("card_authorization.updated", root.clientId, async () => {
      await simulate(`authorizations/${authorizationId}/reverse`, { amount: 5 });
      answer = await authorizationNow(authorizationId);
    }),
    answer,
  );
  record(
    await oneEvent("card_transaction.created", root.clientId, async () => {
      await simulate(`authorizations/${authorizationId}/clear`, {});
    }),
    undefined,
  );
  // Three wrong CVV2s in a row on the card.
  const { expires_on } = await t.ctx.db
    .selectFrom("cards")
    .select(sql<string>`expires_on::text`.as("expires_on"))
    .where("id", "=", cardId)
    .executeTakeFirstOrThrow();
  const cvv = cardVerificationValue(t.ctx.keys.cvv, await panOf(t, cardId), expirationOf(expires_on));
  const wrongCvv = cvv === "000" ? "001" : "000";
  record(
    await oneEvent("card.cvv_failures", root.clientId, async () => {
      for (let i = 0; i < 3; i++)
        await call(t.app, "POST", "/v1/sandbox/cards/authorizations", {
          token: root.token,
          body: {
            card_id: cardId,
            amount: 1,
            merchant: shop,
            channel: "ECOMMERCE",
            cvv2: encryptFor(t.ctx.systemKey.publicKeyPem, wrongCvv),
          },
        });
    }),
    undefined,
  );
  const topup = (extra: Record<string, unknown>) =>
    call<{ topup: unknown }>(t.app, "POST", "/v1/airtime/topup", {
      token: root.token,
      body: { product_id: "TELCEL_50", phone_number: "5512345678", email: "a@example.mx", ...extra },
    });
  record(
    await oneEvent(
      "airtime.completed",
      root.clientId,
      async () => (answer = expectOk(await topup({})).topup),
    ),
    answer,
  );
  airtimeSimulator(t).decide = () => ({ status: "FAILED", reason: "Carrier down", retryable: true });
  try {
    record(
      await oneEvent("airtime.failed", root.clientId, async () =>
        expectError(await topup({ id: cardId }), 6601, 502),
      ),
      undefined,
    );
  } finally {
    airtimeSimulator(t).decide = undefined;
  }
  record(
    await oneEvent(
      "card.status_changed",
      root.clientId,
      async () =>
        (answer = expectOk(
          await card("/v1/cards/status", { status: "TEMPORARY_INACTIVE", reason: "LOST", ...where }, "PUT"),
        )),
    ),
    answer,
  );

  // Each event's data is what the API answered for the same change.
  const { api_client: apiClient, ...subclientRest } = subclient as { api_client: Record<string, unknown> };
  const { api_key: _key, ...apiClientRest } = apiClient;
  assert.deepEqual(seen.get("client.created")?.data, { ...subclientRest, api_client: apiClientRest });
  for (const type of [
    "client.transfer",
    "client.transfer.credited",
    "client.transfer.debited",
    "client.status_changed",
    "cardholder.created",
    "card.assigned",
    "card.activated",
    "card.payment",
    "card.payment.received",
    "card.unloaded",
    "transfer.out.settled",
    "transfer.out.returned",
    "airtime.completed",
    "card.status_changed",
    "card_authorization.created",
    "card_authorization.updated",
  ]) {
    assert.deepEqual(seen.get(type)?.data, answers.get(type), `${type} data differs from the API's answer`);
  }
  // The incoming transfer's event is the 2.8 record plus the CLABE it arrived on.
  const { clabe, ...record28 } = seen.get("transfer.in.received")?.data ?? {};
  assert.equal(clabe, root.clabe);
  assert.deepEqual(record28, answers.get("transfer.in.received"));
  const createdData = seen.get("transfer.out.created")?.data as { id: string; status: string };
  assert.equal(createdData.id, sent.transfer.id);
  assert.equal(createdData.status, "PENDIENTE");
  assert.equal((seen.get("airtime.failed")?.data as { status?: string } | undefined)?.status, "FAILED");
  assert.deepEqual(
    [
      seen.get("card_transaction.created")?.data.type,
      seen.get("card_transaction.created")?.data.amount,
      seen.get("card_transaction.created")?.data.authorization_id,
    ],
    ["CLEARING", 15, authorizationId],
  );

  // No secret in any event. The PIN is four digits, so it is looked for as a value of its own:
  // as a bare substring it turns up inside ids and numbers now and then. UUIDs go first: a
  // version-4 UUID's third group is "4" and three random hex digits, so about one in 4,096 reads
  // "-4821-", which the hex boundaries below do not exclude (a CI run failed that way).
  const everything = JSON.stringify([...seen.values()]).replace(
    /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi,
    "<uuid>",
  );
  assert.ok(!/(^|[^0-9a-f])4821([^0-9a-f]|$)/i.test(everything), "an event carries the PIN");
  for (const secret of [
    await panOf(t, cardId),
    root.password,
    root.token,
    webhook.secret,
    String((subclientBody() as { api_key_password: string }).api_key_password),
  ]) {
    assert.ok(!everything.includes(secret), "an event carries a secret");
  }
  // Every type of the catalog was walked, each by an event of its own.
  assert.deepEqual([...seen.keys()].sort(), [...eventTypes].sort());
  assert.equal(new Set([...seen.values()].map((e) => e.id)).size, eventTypes.length);

  // Every one reaches the receiver, signed under the endpoint's secret, with webhook-id = event id.
  const verify = await readmeVerifier();
  const ids = new Set([...seen.values()].map((e) => e.id));
  await waitFor("a delivery of every event type", () =>
    [...ids].every((id) => receiver.receipts.some((r) => r.headers["webhook-id"] === id)),
  );
  for (const receipt of receiver.receipts.filter((r) => ids.has(String(r.headers["webhook-id"])))) {
    assert.ok(verify(webhook.secret, receipt.headers, receipt.body));
    const body = JSON.parse(receipt.body) as { id: string; type: string; client_id: string; data: unknown };
    assert.equal(body.id, receipt.headers["webhook-id"]);
    assert.deepEqual(body.data, [...seen.values()].find((e) => e.id === body.id)?.data);
  }
});

test("a refused operation writes no event", async () => {
  const poor = await createTenant(t, { available: 1 });
  const product = await createProduct(t, poor);
  const sub = await createSubClient(t, poor, 0);
  const before = await lastSeq();
  expectError(
    await call(t.app, "POST", "/v1/clients", { token: poor.token, body: subclientBody({ available: 5 }) }),
    5102,
    422,
  );
  expectError(
    await call(t.app, "POST", "/v1/clients/transfers", {
      token: poor.token,
      body: { from_client_id: poor.clientId, to_client_id: sub.clientId, amount: 2 },
    }),
    5105,
    422,
  );
  const holder = await createCardholder(t, poor);
  expectError(
    await call(t.app, "PUT", "/v1/cards", {
      token: poor.token,
      body: {
        cardholder_id: holder,
        product_id: product.id,
        document_type: "INE",
        document_number: "X",
        observations: "",
        shipping_method: "B2B",
        delivery_type: "STANDARD",
        delivery_address: null,
      },
    }),
    5302,
    422,
  );
  await mintStock(t, poor, product.id, 1);
  const card = await assignCard(t, poor, holder, product.id);
  expectError(
    await call(t.app, "POST", "/v1/cards/payment", {
      token: poor.token,
      body: { card_number: card.id, amount: 2, payment_description: "x", ...where },
    }),
    5401,
    422,
  );
  expectError(
    await call(t.app, "POST", "/v1/airtime/topup", {
      token: poor.token,
      body: { product_id: "TELCEL_50", phone_number: "5512345678", email: "a@example.mx" },
    }),
    5601,
    422,
  );
  expectError(
    await call(t.app, "PUT", "/v1/cards/status", {
      token: poor.token,
      body: { card_number: card.id, status: "ACTIVE", ...where },
    }),
    5305,
    422,
  );
  const after = (await eventsSince(before)).map((e) => e.type);
  // Only the successful setup (the cardholder and the card) wrote events.
  assert.deepEqual(after, ["cardholder.created", "card.assigned"]);
});
