// Proves card verification on authorizations: the expiry card not present, the CVV2 (computed,
// never stored, ciphered in the message) with wrong ones in a row raising an event, and the POS PIN
// (ciphered, the keyed check transfers out use) counting towards the card's lock, once per message.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { encryptFor } from "../src/crypto/rsa.ts";
import { expirationOf } from "../src/modules/cards/expiry.ts";
import { cardVerificationValue } from "../src/modules/cards/sensitive.ts";
import type { MessageAnswer } from "../src/modules/purchases/service.ts";
import { call, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { panOf, spendableCard } from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { eventsOf, messageId, postCardMessage } from "./helpers/rails.ts";

let t: TestApp;
let tenant: Tenant;
before(async () => {
  t = await startTestApp({ cardNetworkSecret: "network-secret-verification" });
  tenant = await createTenant(t, { available: 100_000 });
});
after(() => t.close());

const merchant = { name: "TIENDA EN LINEA", city: "CDMX", country: "MEX", mcc: "5942", acceptor_id: "W1" };

async function card() {
  const c = await spendableCard(t, tenant, { commission: 0, funds: 1_000 });
  const view = expectOk(await call(t.app, "GET", `/v1/cards/${c.id}`, { token: tenant.token })) as {
    card: { expiration: string };
  };
  const expiration = view.card.expiration.replace("/", "");
  const pan = await panOf(t, c.id);
  const cvv = cardVerificationValue(
    t.ctx.keys.cvv,
    pan,
    expirationOf(`20${expiration.slice(2)}-${expiration.slice(0, 2)}-01`),
  );
  return { id: c.id, expiration, cvv };
}

const cipher = (text: string) => encryptFor(t.ctx.systemKey.publicKeyPem, text);

async function authorize(body: Record<string, unknown>): Promise<MessageAnswer> {
  return expectOk(
    await postCardMessage(t, {
      type: "AUTHORIZATION",
      amount: 1_000,
      merchant,
      channel: "ECOMMERCE",
      ...body,
    }),
  ) as MessageAnswer;
}

test("card not present: the expiry and the CVV2 are checked when sent", async () => {
  const c = await card();
  assert.equal((await authorize({ card_id: c.id, expiration: c.expiration })).result, "APPROVED");
  const wrongMonth = `${String((Number(c.expiration.slice(0, 2)) % 12) + 1).padStart(2, "0")}${c.expiration.slice(2)}`;
  assert.equal(
    (await authorize({ card_id: c.id, expiration: wrongMonth })).decline_reason,
    "INCORRECT_EXPIRY",
  );
  const right = await authorize({ card_id: c.id, expiration: c.expiration, cvv2: cipher(c.cvv) });
  assert.equal(right.result, "APPROVED");
  const wrongCvv = String((Number(c.cvv) + 1) % 1000).padStart(3, "0");
  const wrong = await authorize({ card_id: c.id, expiration: c.expiration, cvv2: cipher(wrongCvv) });
  assert.deepEqual([wrong.result, wrong.decline_reason], ["DECLINED", "INCORRECT_CVV"]);
  const view = expectOk(
    await call(t.app, "GET", `/v1/authorizations/${wrong.authorization_id}`, { token: tenant.token }),
  ) as {
    authorization: { status: string; decline_reason: string };
  };
  assert.deepEqual(
    [view.authorization.status, view.authorization.decline_reason],
    ["DECLINED", "INCORRECT_CVV"],
  );
});

test("three wrong CVV2s in a row raise one event; a right one starts the count again", async () => {
  const c = await card();
  const wrongCvv = String((Number(c.cvv) + 7) % 1000).padStart(3, "0");
  const failuresEvents = async () =>
    (await eventsOf(t, tenant.clientId, "card.cvv_failures")).filter((data) => data.card_id === c.id);
  for (let i = 0; i < 2; i++)
    await authorize({ card_id: c.id, expiration: c.expiration, cvv2: cipher(wrongCvv) });
  assert.equal((await failuresEvents()).length, 0);
  await authorize({ card_id: c.id, expiration: c.expiration, cvv2: cipher(c.cvv) });
  for (let i = 0; i < 3; i++)
    await authorize({ card_id: c.id, expiration: c.expiration, cvv2: cipher(wrongCvv) });
  await authorize({ card_id: c.id, expiration: c.expiration, cvv2: cipher(wrongCvv) });
  const events = await failuresEvents();
  assert.equal(events.length, 1);
  assert.deepEqual(events[0], { card_id: c.id, failures: 3 });
});

test("a POS PIN is the keyed check: a wrong one declines and counts towards the lock, once per message", async () => {
  const c = await card();
  const pos = { card_id: c.id, channel: "POS_CHIP" };
  assert.equal((await authorize({ ...pos, pin: cipher("4821") })).result, "APPROVED");
  const id = messageId();
  const first = await authorize({ ...pos, message_id: id, pin: cipher("1111") });
  assert.equal(first.decline_reason, "INCORRECT_PIN");
  // The network's repeat answers the first answer and counts nothing again.
  const repeat = await postCardMessage(t, {
    type: "AUTHORIZATION",
    amount: 1_000,
    merchant,
    ...pos,
    message_id: id,
    pin: cipher("1111"),
  });
  assert.equal(repeat.headers["idempotent-replayed"], "true");
  assert.equal((await authorize({ ...pos, pin: cipher("2222") })).decline_reason, "INCORRECT_PIN");
  assert.equal((await authorize({ ...pos, pin: cipher("3333") })).decline_reason, "PIN_LOCKED");
  assert.equal((await authorize({ ...pos, pin: cipher("4821") })).decline_reason, "PIN_LOCKED");
  const state = expectOk(await call(t.app, "GET", `/v1/cards/${c.id}`, { token: tenant.token })) as {
    card: { pin_locked: boolean };
  };
  assert.equal(state.card.pin_locked, true);
});

test("verification fields are refused where they do not belong, and in clear", async () => {
  const c = await card();
  const base = { type: "AUTHORIZATION", card_id: c.id, amount: 100, merchant, channel: "ECOMMERCE" };
  const refusedOn = async (body: Record<string, unknown>, code: number, field?: string) => {
    const refused = expectError(await postCardMessage(t, body), code, 400);
    if (field === undefined) return;
    const details = (refused.body.data as { details: Array<{ field: string }> }).details;
    assert.deepEqual(
      details.map((d) => d.field),
      [field],
    );
  };
  await refusedOn(
    { type: "CLEARING", card_id: c.id, amount: 100, merchant, cvv2: cipher("123") },
    1000,
    "cvv2",
  );
  await refusedOn({ ...base, pin: "4821" }, 1000, "pin");
  await refusedOn({ ...base, expiration: "1399" }, 1000, "expiration");
  await refusedOn({ ...base, cvv2: "not-ciphered" }, 1005);
  await refusedOn({ ...base, cvv2: cipher("12") }, 1000, "cvv2");
});
