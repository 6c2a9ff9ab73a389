// Proves spending controls through the HTTP front door: each kind at each scope, inheritance and
// precedence across scopes (the strictest wins, a sub-client cannot loosen an ancestor's control),
// velocity counting of holds, releases and clearings, exact counting under 100 concurrent
// authorizations, the card's effective rules with what each window used, validation and tenancy.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { MessageAnswer } from "../src/modules/purchases/service.ts";
import { call, createSubClient, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { assignCard, createCardholder, createProduct, mintStock, spendableCard } from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { assertLedgerBalanced, postCardMessage } from "./helpers/rails.ts";

let t: TestApp;
let root: Tenant;
before(async () => {
  t = await startTestApp({ cardNetworkSecret: "network-secret-controls" });
  root = await createTenant(t, { available: 1_000_000 });
});
after(() => t.close());

const grocery = { name: "OXXO", city: "CDMX", country: "MEX", mcc: "5411", acceptor_id: "T1" };
const casino = { ...grocery, name: "CASINO", mcc: "7995" };
const abroad = { ...grocery, name: "WALMART TX", country: "USA" };

async function authorize(cardId: string, cents: number, extra: Record<string, unknown> = {}) {
  const response = await postCardMessage(t, {
    type: "AUTHORIZATION",
    card_id: cardId,
    amount: cents,
    merchant: grocery,
    channel: "POS_CHIP",
    ...extra,
  });
  return expectOk(response) as MessageAnswer;
}

async function control(tenant: Tenant, body: Record<string, unknown>) {
  return call<{ spending_control: { id: string } }>(t.app, "POST", "/v1/spending_controls", {
    token: tenant.token,
    body,
  });
}

async function card(
  tenant: Tenant,
  funds = 10_000,
): Promise<{ id: string; cardholderId: string; productId: string }> {
  return spendableCard(t, tenant, { commission: 0, funds });
}

/** An ACTIVE card of `tenant` from `productId`, for its cardholder (a new one unless given), funded. */
async function cardOf(tenant: Tenant, productId: string, cardholderId?: string): Promise<string> {
  const assigned = await assignCard(
    t,
    tenant,
    cardholderId ?? (await createCardholder(t, tenant)),
    productId,
  );
  const where = { latitude: 19.4, longitude: -99.1 };
  expectOk(
    await call(t.app, "POST", "/v1/cards/activate", {
      token: tenant.token,
      body: { card_number: assigned.id, ...where },
    }),
  );
  expectOk(
    await call(t.app, "POST", "/v1/cards/payment", {
      token: tenant.token,
      body: { card_number: assigned.id, amount: 1_000, payment_description: "fondeo", ...where },
    }),
  );
  return assigned.id;
}

test("each kind of control declines with its own reason, at the card's scope", async () => {
  const c = await card(root);
  const on = { scope: "CARD", target_id: c.id };
  expectOk(await control(root, { ...on, type: "MAX_AMOUNT", amount: 500 }));
  expectOk(await control(root, { ...on, type: "MCC", mode: "BLOCK", mcc_groups: ["gambling"] }));
  expectOk(await control(root, { ...on, type: "MERCHANT_COUNTRY", mode: "ALLOW", countries: ["MX"] }));
  expectOk(await control(root, { ...on, type: "CHANNEL", atm: false }));
  expectOk(await control(root, { ...on, type: "VELOCITY_LIMIT", window: "DAY", count_limit: 3 }));
  const reasons = [
    (await authorize(c.id, 50_001)).decline_reason,
    (await authorize(c.id, 100, { merchant: casino })).decline_reason,
    (await authorize(c.id, 100, { merchant: abroad })).decline_reason,
    (await authorize(c.id, 100, { channel: "ATM" })).decline_reason,
  ];
  assert.deepEqual(reasons, ["AMOUNT_ABOVE_MAXIMUM", "MCC_BLOCKED", "COUNTRY_BLOCKED", "CHANNEL_BLOCKED"]);
  const approved = [await authorize(c.id, 100), await authorize(c.id, 100), await authorize(c.id, 100)];
  assert.ok(approved.every((a) => a.result === "APPROVED"));
  assert.equal((await authorize(c.id, 100)).decline_reason, "SPENDING_LIMIT_EXCEEDED");
  const view = expectOk(
    await call(t.app, "GET", `/v1/authorizations/${approved[0]?.authorization_id}`, { token: root.token }),
  ) as {
    authorization: { status: string };
  };
  assert.equal(view.authorization.status, "PENDING");
});

test("controls at the product, cardholder and client scopes reach their cards, and only those", async () => {
  const sub = await createSubClient(t, root, 100_000);
  const product = await createProduct(t, root);
  await mintStock(t, root, product.id, 4);
  expectOk(
    await call(t.app, "PUT", `/v1/products/${product.id}/clients/${sub.clientId}`, { token: root.token }),
  );
  const holder = await createCardholder(t, root);
  const mine = await cardOf(root, product.id, holder);
  const mineToo = await cardOf(root, product.id, holder);
  const theirs = await cardOf(sub, product.id);
  expectOk(
    await control(root, { scope: "CLIENT", target_id: sub.clientId, type: "CHANNEL", ecommerce: false }),
  );
  assert.equal((await authorize(theirs, 100, { channel: "ECOMMERCE" })).decline_reason, "CHANNEL_BLOCKED");
  assert.equal((await authorize(mine, 100, { channel: "ECOMMERCE" })).result, "APPROVED");
  expectOk(await control(root, { scope: "CARDHOLDER", target_id: holder, type: "MAX_AMOUNT", amount: 1 }));
  assert.equal((await authorize(mine, 101)).decline_reason, "AMOUNT_ABOVE_MAXIMUM");
  assert.equal((await authorize(mineToo, 101)).decline_reason, "AMOUNT_ABOVE_MAXIMUM");
  assert.equal((await authorize(theirs, 101)).result, "APPROVED");
  // The sub-client's control on the product it was given reaches its own cards of it, not root's.
  expectOk(
    await control(sub, {
      scope: "PRODUCT",
      target_id: product.id,
      type: "MCC",
      mode: "ALLOW",
      mccs: ["5812"],
    }),
  );
  assert.equal((await authorize(theirs, 100)).decline_reason, "MCC_BLOCKED");
  assert.equal((await authorize(mine, 100)).result, "APPROVED");
  // Root's control on its product reaches every card of it in root's tree.
  expectOk(
    await control(root, { scope: "PRODUCT", target_id: product.id, type: "CHANNEL", contactless: false }),
  );
  for (const id of [mine, theirs])
    assert.equal((await authorize(id, 100, { channel: "CONTACTLESS" })).decline_reason, "CHANNEL_BLOCKED");
  await assertLedgerBalanced(t);
});

test("the strictest control wins, and a sub-client cannot loosen or touch its ancestor's", async () => {
  const sub = await createSubClient(t, root, 100_000);
  const c = await card(sub);
  const strict = expectOk(
    await control(root, {
      scope: "CLIENT",
      target_id: sub.clientId,
      type: "VELOCITY_LIMIT",
      window: "DAY",
      amount_limit: 10,
    }),
  ).spending_control;
  expectOk(
    await control(sub, {
      scope: "CARD",
      target_id: c.id,
      type: "VELOCITY_LIMIT",
      window: "DAY",
      amount_limit: 5_000,
    }),
  );
  assert.equal((await authorize(c.id, 800)).result, "APPROVED");
  assert.equal((await authorize(c.id, 300)).decline_reason, "SPENDING_LIMIT_EXCEEDED");
  expectError(
    await call(t.app, "DELETE", `/v1/spending_controls/${strict.id}`, { token: sub.token }),
    3803,
    404,
  );
  expectError(
    await call(t.app, "PUT", `/v1/spending_controls/${strict.id}`, {
      token: sub.token,
      body: { type: "VELOCITY_LIMIT", window: "DAY", amount_limit: 99_999 },
    }),
    3803,
    404,
  );
  const effective = expectOk(
    await call(t.app, "GET", `/v1/cards/${c.id}/spending_controls`, { token: sub.token }),
  ) as {
    rules: unknown[];
    effective: {
      velocity: Array<{
        window: string;
        amount_limit: number;
        used_amount: number;
        remaining_amount: number;
      }>;
    };
  };
  assert.equal(effective.rules.length, 2);
  assert.deepEqual(effective.effective.velocity, [
    {
      window: "DAY",
      amount_limit: 10,
      count_limit: null,
      used_amount: 8,
      used_count: 1,
      remaining_amount: 2,
      remaining_count: null,
    },
  ]);
  // The ancestor changes its own control, and the next authorization sees it.
  expectOk(
    await call(t.app, "PUT", `/v1/spending_controls/${strict.id}`, {
      token: root.token,
      body: { type: "VELOCITY_LIMIT", window: "DAY", amount_limit: 20 },
    }),
  );
  assert.equal((await authorize(c.id, 300)).result, "APPROVED");
});

test("a velocity limit counts holds, gives back releases, and adds what a clearing adds", async () => {
  const c = await card(root);
  expectOk(
    await control(root, {
      scope: "CARD",
      target_id: c.id,
      type: "VELOCITY_LIMIT",
      window: "MONTH",
      amount_limit: 100,
    }),
  );
  const first = await authorize(c.id, 6_000);
  assert.equal((await authorize(c.id, 5_000)).decline_reason, "SPENDING_LIMIT_EXCEEDED");
  expectOk(
    await postCardMessage(t, {
      type: "AUTHORIZATION_REVERSAL",
      authorization_id: first.authorization_id,
      amount: 2_000,
    }),
  );
  const second = await authorize(c.id, 5_000);
  assert.equal(second.result, "APPROVED");
  // Cleared above its hold (not a restaurant: posted, flagged): the difference counts.
  expectOk(
    await postCardMessage(t, { type: "CLEARING", authorization_id: second.authorization_id, amount: 6_000 }),
  );
  const usage = expectOk(
    await call(t.app, "GET", `/v1/cards/${c.id}/spending_controls`, { token: root.token }),
  ) as {
    rules: Array<{ usage: { used_amount: number; remaining_amount: number; used_count: number } }>;
  };
  assert.deepEqual(
    [
      usage.rules[0]?.usage.used_amount,
      usage.rules[0]?.usage.remaining_amount,
      usage.rules[0]?.usage.used_count,
    ],
    [100, 0, 2],
  );
  assert.equal((await authorize(c.id, 1)).decline_reason, "SPENDING_LIMIT_EXCEEDED");
});

test("100 authorizations at once against a limit that allows 10: exactly 10 approved", async () => {
  const c = await card(root, 100_000);
  expectOk(
    await control(root, {
      scope: "CARD",
      target_id: c.id,
      type: "VELOCITY_LIMIT",
      window: "DAY",
      count_limit: 10,
    }),
  );
  const answers = await Promise.all(Array.from({ length: 100 }, () => authorize(c.id, 100)));
  assert.equal(answers.filter((a) => a.result === "APPROVED").length, 10);
  assert.ok(
    answers
      .filter((a) => a.result !== "APPROVED")
      .every((a) => a.decline_reason === "SPENDING_LIMIT_EXCEEDED"),
  );
  const byAmount = await card(root, 100_000);
  expectOk(
    await control(root, {
      scope: "CARD",
      target_id: byAmount.id,
      type: "VELOCITY_LIMIT",
      window: "WEEK",
      amount_limit: 10,
    }),
  );
  const spent = await Promise.all(Array.from({ length: 100 }, () => authorize(byAmount.id, 100)));
  assert.equal(spent.filter((a) => a.result === "APPROVED").length, 10);
  await assertLedgerBalanced(t);
});

test("bad controls are 400s naming the field; targets outside the subtree are not found", async () => {
  const other = await createTenant(t);
  const c = await card(root);
  const on = { scope: "CARD", target_id: c.id };
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ ...on, type: "VELOCITY_LIMIT", amount_limit: 10 }, "window"],
    [{ ...on, type: "VELOCITY_LIMIT", window: "DAY" }, "amount_limit"],
    [{ ...on, type: "VELOCITY_LIMIT", window: "TRANSACTION", count_limit: 2 }, "count_limit"],
    [{ ...on, type: "MCC", mode: "BLOCK", mcc_groups: ["no_such_group"] }, "mcc_groups/0"],
    [{ ...on, type: "MCC", mode: "BLOCK", countries: ["MX"], mccs: ["5411"] }, "countries"],
    [{ ...on, type: "MERCHANT_COUNTRY", mode: "ALLOW", countries: ["ZZ"] }, "countries/0"],
    [{ ...on, type: "CHANNEL" }, "ecommerce"],
    [{ ...on, type: "MAX_AMOUNT", amount: 0.001 }, "amount"],
  ];
  for (const [body, field] of cases) {
    const refused = expectError(await control(root, body), 1000, 400);
    const details = (refused.body.data as { details: Array<{ field: string }> }).details;
    assert.ok(
      details.some((d) => d.field === field),
      `${field} in ${JSON.stringify(details)}`,
    );
  }
  expectError(await control(other, { ...on, type: "MAX_AMOUNT", amount: 1 }), 3302, 404);
  expectError(
    await control(other, { scope: "CLIENT", target_id: root.clientId, type: "MAX_AMOUNT", amount: 1 }),
    3101,
    404,
  );
  const mine = expectOk(await control(root, { ...on, type: "MAX_AMOUNT", amount: 1 })).spending_control;
  expectError(
    await call(t.app, "GET", `/v1/spending_controls/${mine.id}`, { token: other.token }),
    3803,
    404,
  );
  expectError(
    await call(t.app, "PUT", `/v1/spending_controls/${mine.id}`, {
      token: root.token,
      body: { type: "CHANNEL", atm: false },
    }),
    5804,
    422,
  );
  const listed = expectOk(
    await call(t.app, "GET", `/v1/spending_controls?target_id=${c.id}`, { token: root.token }),
  ) as { spending_controls: Array<{ id: string }> };
  assert.deepEqual(
    listed.spending_controls.map((x) => x.id),
    [mine.id],
  );
  expectOk(await call(t.app, "DELETE", `/v1/spending_controls/${mine.id}`, { token: root.token }));
  assert.equal((await authorize(c.id, 200)).result, "APPROVED");
});
