// Proves POST /v1/clients/transfers and GET /v1/clients/transfers: money between the main balances
// of two clients of the caller's subtree as one balanced entry with its event (down, up, between
// descendants, out of a disabled client), the minimum balance and a disabled receiver refused with
// nothing written, 3101 for any client outside the subtree, idempotency, no overdraft or deadlock
// under concurrency, and a listing each side can reconcile with, blind to clients it may not see.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { balanceOf, checkInvariants } from "../src/ledger/ledger.ts";
import { limits } from "../src/limits.ts";
import { call, createSubClient, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { changesBetween, snapshot, tablesOf } from "./helpers/routes.ts";

let t: TestApp;
let tables: string[];
before(async () => {
  t = await startTestApp();
  tables = await tablesOf(t);
});
after(() => t.close());

interface TransferView {
  id: string;
  from_client_id: string | null;
  to_client_id: string | null;
  created_by_client_id: string | null;
  amount: number;
  description: string | null;
  created_at: string;
}
interface TransferAnswer {
  transfer: TransferView;
  from_available: number;
  to_available: number;
}
interface Listing {
  transfers: TransferView[];
  per_page: number;
  next_cursor: string | null;
}

const move = (
  caller: Pick<Tenant, "token">,
  from: string,
  to: string,
  amount: number,
  extra: { description?: string; key?: string } = {},
) =>
  call<TransferAnswer>(t.app, "POST", "/v1/clients/transfers", {
    token: caller.token,
    body: {
      from_client_id: from,
      to_client_id: to,
      amount,
      ...(extra.description !== undefined ? { description: extra.description } : {}),
    },
    ...(extra.key ? { headers: { "idempotency-key": extra.key } } : {}),
  });

const list = (caller: Pick<Tenant, "token">, query = "") =>
  call<Listing>(t.app, "GET", `/v1/clients/transfers${query}`, { token: caller.token });

const cents = (clientId: string) => balanceOf(t.ctx.db, clientId);

async function eventsOf(clientId: string) {
  return t.ctx.db
    .selectFrom("events")
    .select(["data"])
    .where("type", "=", "client.transfer")
    .where("client_id", "=", clientId)
    .orderBy("seq")
    .execute();
}

async function disable(parent: Tenant, clientId: string) {
  expectOk(
    await call(t.app, "PUT", `/v1/clients/${clientId}/status`, {
      token: parent.token,
      body: { status: "DISABLED" },
    }),
  );
}

test("a parent funds a sub-client and takes money back: one balanced entry each, the caller's event", async () => {
  const parent = await createTenant(t, { available: 1000 });
  const child = await createSubClient(t, parent, 0);

  const down = expectOk(
    await move(parent, parent.clientId, child.clientId, 250.75, { description: "Fondeo" }),
  );
  assert.deepEqual(Object.keys(down).sort(), ["from_available", "to_available", "transfer"]);
  assert.deepEqual(
    { ...down.transfer, id: "", created_at: "" },
    {
      id: "",
      from_client_id: parent.clientId,
      to_client_id: child.clientId,
      created_by_client_id: parent.clientId,
      amount: 250.75,
      description: "Fondeo",
      created_at: "",
    },
  );
  assert.match(down.transfer.id, /^[0-9a-f-]{36}$/);
  assert.ok(Math.abs(Date.parse(down.transfer.created_at) - Date.now()) < 60_000);
  assert.deepEqual([down.from_available, down.to_available], [749.25, 250.75]);
  assert.equal(await cents(parent.clientId), 74925n);
  assert.equal(await cents(child.clientId), 25075n);
  // The child sees the money on its own balance.
  const childBalance = expectOk(
    await call<{ balance: { available: number } }>(t.app, "GET", "/v1/clients/balance", {
      token: child.token,
    }),
  );
  assert.equal(childBalance.balance.available, 250.75);

  // Back up: the parent sweeps part of it; no description is null.
  const up = expectOk(await move(parent, child.clientId, parent.clientId, 100));
  assert.equal(up.transfer.description, null);
  assert.deepEqual([up.from_available, up.to_available], [150.75, 849.25]);

  // Each is one journal entry of kind CLIENT_TRANSFER with the transfer's id and two postings.
  for (const [answer, from, to, amount] of [
    [down, parent.clientId, child.clientId, 25075n],
    [up, child.clientId, parent.clientId, 10000n],
  ] as const) {
    const entry = await t.ctx.db
      .selectFrom("journal_entries")
      .select(["kind", "client_id", "description"])
      .where("id", "=", answer.transfer.id)
      .executeTakeFirstOrThrow();
    assert.equal(entry.kind, "CLIENT_TRANSFER");
    assert.equal(entry.client_id, parent.clientId);
    const postings = await t.ctx.db
      .selectFrom("postings")
      .select(["account_id", "amount_cents"])
      .where("entry_id", "=", answer.transfer.id)
      .orderBy("amount_cents")
      .execute();
    assert.deepEqual(postings, [
      { account_id: from, amount_cents: -amount },
      { account_id: to, amount_cents: amount },
    ]);
  }
  // The event is the caller's, and is exactly the answer's data; the child gets none.
  assert.deepEqual(
    (await eventsOf(parent.clientId)).map((e) => e.data),
    [down, up],
  );
  assert.equal((await eventsOf(child.clientId)).length, 0);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("between two descendants, and a sub-client within its own subtree, but never above it", async () => {
  const root = await createTenant(t, { available: 1000 });
  const left = await createSubClient(t, root, 300);
  const right = await createSubClient(t, root, 0);
  const grandchild = await createSubClient(t, right, 0);

  // The root moves money between a child and a grandchild under the other child.
  const across = expectOk(await move(root, left.clientId, grandchild.clientId, 120));
  assert.equal(across.transfer.created_by_client_id, root.clientId);
  assert.deepEqual([across.from_available, across.to_available], [180, 120]);
  // A sub-client moves within its own subtree: down to its child and back, with its own event.
  expectOk(await move(right, grandchild.clientId, right.clientId, 20));
  expectOk(await move(right, right.clientId, grandchild.clientId, 5));
  assert.equal((await eventsOf(right.clientId)).length, 2);
  assert.equal(await cents(grandchild.clientId), 10500n);
  assert.equal(await cents(right.clientId), 1500n);
  // ...but it neither pays its parent nor takes from it.
  expectError(await move(right, right.clientId, root.clientId, 1), 3101, 404);
  expectError(await move(right, root.clientId, right.clientId, 1), 3101, 404);
  assert.equal(await cents(root.clientId), 70000n);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("a disabled sub-client's money is swept back; a disabled receiver (or one below it) is 5106, nothing written", async () => {
  const parent = await createTenant(t, { available: 1000 });
  const child = await createSubClient(t, parent, 400);
  const grandchild = await createSubClient(t, child, 50);
  const other = await createSubClient(t, parent, 0);
  await disable(parent, child.clientId);

  // Out of the disabled client and out of the client below it: allowed, down to 0.
  const swept = expectOk(await move(parent, child.clientId, parent.clientId, 350));
  assert.deepEqual([swept.from_available, swept.to_available], [0, 950]);
  expectOk(await move(parent, grandchild.clientId, other.clientId, 50));
  assert.equal(await cents(grandchild.clientId), 0n);

  const before = await snapshot(t, tables);
  for (const to of [child.clientId, grandchild.clientId]) {
    const refused = expectError(await move(parent, parent.clientId, to, 1), 5106, 422);
    assert.match(refused.body.message, /disabled/);
    // Between two disabled clients as well: the receiver decides.
    expectError(
      await move(parent, to === child.clientId ? grandchild.clientId : child.clientId, to, 0.01),
      5106,
    );
  }
  assert.deepEqual(changesBetween(before, await snapshot(t, tables)), []);

  // Enabled again, it may receive.
  expectOk(
    await call(t.app, "PUT", `/v1/clients/${child.clientId}/status`, {
      token: parent.token,
      body: { status: "ACTIVE" },
    }),
  );
  expectOk(await move(parent, parent.clientId, grandchild.clientId, 1));
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("the paying client keeps its minimum balance: 5105 and nothing written; exactly down to it is allowed", async () => {
  const parent = await createTenant(t, { available: 100 });
  const child = await createSubClient(t, parent, 60);
  await t.ctx.db
    .updateTable("clients")
    .set({ min_balance_cents: 1000n })
    .where("id", "=", child.clientId)
    .execute();
  await t.ctx.db
    .updateTable("clients")
    .set({ min_balance_cents: 2500n })
    .where("id", "=", parent.clientId)
    .execute();

  const before = await snapshot(t, tables);
  for (const [from, to, amount] of [
    [child.clientId, parent.clientId, 50.01],
    [child.clientId, parent.clientId, 60],
    [parent.clientId, child.clientId, 15.01],
    [parent.clientId, child.clientId, limits.fundingCentsMax / 100n],
  ] as const) {
    const refused = expectError(await move(parent, from, to, Number(amount)), 5105, 422);
    assert.match(refused.body.message, /minimum balance/);
  }
  assert.deepEqual(changesBetween(before, await snapshot(t, tables)), []);
  assert.equal((await eventsOf(parent.clientId)).length, 0);

  expectOk(await move(parent, child.clientId, parent.clientId, 50));
  expectOk(await move(parent, parent.clientId, child.clientId, 65));
  assert.equal(await cents(parent.clientId), 2500n);
  assert.equal(await cents(child.clientId), 7500n);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("a client outside the caller's subtree, on either side, is 3101 and nothing is written", async () => {
  const parent = await createTenant(t, { available: 100 });
  const child = await createSubClient(t, parent, 50);
  const sibling = await createSubClient(t, parent, 50);
  const stranger = await createTenant(t, { available: 100 });
  const strangerChild = await createSubClient(t, stranger, 10);

  const before = await snapshot(t, tables);
  const attempts: Array<[Tenant, string, string]> = [
    // A sub-client on its parent and its sibling.
    [child, child.clientId, parent.clientId],
    [child, parent.clientId, child.clientId],
    [child, child.clientId, sibling.clientId],
    [child, sibling.clientId, child.clientId],
    // Another organisation, its root and its sub-client, as payer or receiver.
    [parent, stranger.clientId, parent.clientId],
    [parent, parent.clientId, stranger.clientId],
    [parent, strangerChild.clientId, child.clientId],
    [parent, child.clientId, strangerChild.clientId],
    // No such client at all.
    [parent, randomUUID(), parent.clientId],
    [parent, parent.clientId, randomUUID()],
  ];
  for (const [caller, from, to] of attempts) {
    expectError(await move(caller, from, to, 1), 3101, 404);
  }
  assert.deepEqual(changesBetween(before, await snapshot(t, tables)), []);
});

test("invalid requests: 1000 naming the field, nothing written", async () => {
  const parent = await createTenant(t, { available: 100 });
  const child = await createSubClient(t, parent, 0);
  const valid = { from_client_id: parent.clientId, to_client_id: child.clientId, amount: 1 };
  const cases: Array<[Record<string, unknown>, string, string]> = [
    [{ to_client_id: parent.clientId }, "to_client_id", "different"],
    // The same client in the other letter case is still the same client.
    [{ to_client_id: parent.clientId.toUpperCase() }, "to_client_id", "different"],
    [{ amount: 0 }, "amount", "exclusiveMinimum"],
    [{ amount: -5 }, "amount", "exclusiveMinimum"],
    [{ amount: 1.001 }, "amount", "x-decimals"],
    [{ amount: Number(limits.fundingCentsMax) / 100 + 0.01 }, "amount", "maximum"],
    [{ amount: "10" }, "amount", "type"],
    [{ from_client_id: "not-a-uuid" }, "from_client_id", "format"],
    [{ to_client_id: `{${child.clientId}}` }, "to_client_id", "format"],
    [{ description: "" }, "description", "minLength"],
    [{ description: "   " }, "description", "blank"],
    [{ description: "x".repeat(limits.clientTransferDescriptionLengthMax + 1) }, "description", "maxLength"],
    [{ parent_id: parent.clientId }, "parent_id", "additionalProperties"],
  ];
  const before = await snapshot(t, tables);
  for (const [override, field, rule] of cases) {
    const response = expectError(
      await call(t.app, "POST", "/v1/clients/transfers", {
        token: parent.token,
        body: { ...valid, ...override },
      }),
      1000,
      400,
    );
    const details = (response.body.data as { details: Array<{ field: string; rule: string }> }).details;
    assert.ok(
      details.some((d) => d.field === field && d.rule === rule),
      `${JSON.stringify(override)}: ${JSON.stringify(details)}`,
    );
  }
  for (const missing of ["from_client_id", "to_client_id", "amount"]) {
    const body: Record<string, unknown> = { ...valid };
    delete body[missing];
    expectError(await call(t.app, "POST", "/v1/clients/transfers", { token: parent.token, body }), 1000, 400);
  }
  expectError(await call(t.app, "POST", "/v1/clients/transfers", { body: valid }), 2001, 401);
  assert.deepEqual(changesBetween(before, await snapshot(t, tables)), []);
  // The largest amount is accepted by the schema (and then refused on the balance, not 500).
  expectError(
    await move(parent, parent.clientId, child.clientId, Number(limits.fundingCentsMax) / 100),
    5105,
  );
});

test("Idempotency-Key: a repeat replays the first answer and moves the money once; another body is 4001", async () => {
  const parent = await createTenant(t, { available: 100 });
  const child = await createSubClient(t, parent, 0);
  const first = await move(parent, parent.clientId, child.clientId, 30, { key: "top-up-1" });
  expectOk(first);
  const again = await move(parent, parent.clientId, child.clientId, 30, { key: "top-up-1" });
  assert.deepEqual(again.body, first.body);
  assert.equal(again.headers["idempotent-replayed"], "true");
  // The ids in another letter case name the same clients: the same request (review finding: 4001).
  const upper = await move(parent, parent.clientId.toUpperCase(), child.clientId.toUpperCase(), 30, {
    key: "top-up-1",
  });
  assert.deepEqual([upper.body, upper.headers["idempotent-replayed"]], [first.body, "true"]);
  expectError(await move(parent, parent.clientId, child.clientId, 31, { key: "top-up-1" }), 4001, 409);

  // Duplicates racing: one transfer.
  const raced = await Promise.all(
    Array.from({ length: 8 }, () => move(parent, parent.clientId, child.clientId, 5, { key: "top-up-race" })),
  );
  assert.equal(new Set(raced.map((r) => expectOk(r).transfer.id)).size, 1);
  assert.equal(await cents(parent.clientId), 6500n);
  assert.equal((await eventsOf(parent.clientId)).length, 2);

  // A refusal is the key's final answer: replayed even once the money is there.
  expectError(await move(parent, child.clientId, parent.clientId, 50, { key: "sweep-1" }), 5105, 422);
  expectOk(await move(parent, parent.clientId, child.clientId, 20));
  const replayed = expectError(
    await move(parent, child.clientId, parent.clientId, 50, { key: "sweep-1" }),
    5105,
  );
  assert.equal(replayed.headers["idempotent-replayed"], "true");
  assert.equal(await cents(child.clientId), 5500n);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("concurrency: 20 transfers of 10 from a client holding 100 pay exactly 10; crossed transfers do not deadlock", async () => {
  const parent = await createTenant(t, { available: 1000 });
  const payer = await createSubClient(t, parent, 100);
  const receivers = [await createSubClient(t, parent, 0), await createSubClient(t, parent, 0)];
  const answers = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      move(parent, payer.clientId, receivers[i % 2]?.clientId ?? "", 10, { key: `drain-${i}` }),
    ),
  );
  const succeeded = answers.filter((r) => r.status === 200);
  assert.equal(succeeded.length, 10);
  for (const refused of answers.filter((r) => r.status !== 200)) expectError(refused, 5105, 422);
  assert.equal(await cents(payer.clientId), 0n);
  // Each balance reported right after its transfer is one of the ten steps down, each once.
  assert.deepEqual(
    succeeded.map((r) => expectOk(r).from_available).sort((x, y) => x - y),
    [0, 10, 20, 30, 40, 50, 60, 70, 80, 90],
  );
  const [one, two] = receivers;
  assert.ok(one && two);
  assert.equal((await cents(one.clientId)) + (await cents(two.clientId)), 10000n);

  // Both directions between the same two clients at once: each locks the two balances in the same
  // order, so none waits for the other forever (PostgreSQL would abort one as a deadlock: 500).
  const crossed = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      i % 2 === 0 ? move(parent, one.clientId, two.clientId, 1) : move(parent, two.clientId, one.clientId, 1),
    ),
  );
  for (const answer of crossed)
    assert.ok(answer.status === 200 || answer.body.code === 5105, JSON.stringify(answer.body));
  assert.equal((await cents(one.clientId)) + (await cents(two.clientId)), 10000n);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("the listing: each side sees the transfers on its balance, newest first; a client it may not see is null", async () => {
  const root = await createTenant(t, { available: 1000 });
  const left = await createSubClient(t, root, 0);
  const right = await createSubClient(t, root, 0);
  const leftChild = await createSubClient(t, left, 0);
  const stranger = await createTenant(t, { available: 10 });
  const t1 = expectOk(await move(root, root.clientId, left.clientId, 100, { description: "uno" })).transfer;
  const t2 = expectOk(await move(root, left.clientId, right.clientId, 40, { description: "dos" })).transfer;
  const t3 = expectOk(await move(root, right.clientId, root.clientId, 15)).transfer;
  const t4 = expectOk(await move(left, left.clientId, leftChild.clientId, 10)).transfer;
  const hidden = (
    view: TransferView,
    ...fields: Array<"from_client_id" | "to_client_id" | "created_by_client_id">
  ) => ({
    ...view,
    ...Object.fromEntries(fields.map((field) => [field, null])),
  });

  // The root sees all four, exactly as they were answered.
  assert.deepEqual(expectOk(await list(root)).transfers, [t4, t3, t2, t1]);
  // The left child: what its parent put in, what its parent moved to its sibling (who is null),
  // and what it gave its own child; not the sibling's sweep to the root.
  const leftSees = expectOk(await list(left));
  assert.deepEqual(leftSees.transfers, [
    t4,
    hidden(t2, "to_client_id", "created_by_client_id"),
    hidden(t1, "from_client_id", "created_by_client_id"),
  ]);
  assert.ok(!JSON.stringify(leftSees).includes(right.clientId), "the left child sees its sibling's id");
  assert.deepEqual(expectOk(await list(right)).transfers, [
    hidden(t3, "to_client_id", "created_by_client_id"),
    hidden(t2, "from_client_id", "created_by_client_id"),
  ]);
  assert.deepEqual(expectOk(await list(leftChild)).transfers, [
    hidden(t4, "from_client_id", "created_by_client_id"),
  ]);
  assert.deepEqual(expectOk(await list(stranger)).transfers, []);

  // client_id: either side; outside the subtree 3101.
  assert.deepEqual(
    expectOk(await list(root, `?client_id=${left.clientId}`)).transfers.map((x) => x.id),
    [t4.id, t2.id, t1.id],
  );
  assert.deepEqual(
    expectOk(await list(root, `?client_id=${leftChild.clientId.toUpperCase()}`)).transfers.map((x) => x.id),
    [t4.id],
  );
  for (const [who, id] of [
    [left, right.clientId],
    [left, root.clientId],
    [root, stranger.clientId],
    [root, randomUUID()],
  ] as const) {
    expectError(await list(who, `?client_id=${id}`), 3101, 404);
  }

  // Creation window: created_to is exclusive; an empty window is 1000.
  const future = new Date(Date.now() + 3_600_000).toISOString();
  assert.equal(expectOk(await list(root, `?created_from=${future}`)).transfers.length, 0);
  assert.equal(expectOk(await list(root, `?created_to=${future}`)).transfers.length, 4);
  expectError(await list(root, `?created_from=${future}&created_to=${future}`), 1000, 400);
  expectError(await list(root, `?per_page=${limits.pageSizeMax + 1}`), 1000, 400);
  expectError(await list(root, "?status=DONE"), 1000, 400);
});

test("the listing pages by cursor: every transfer once while new ones arrive; a cursor is bound to its query", async () => {
  const root = await createTenant(t, { available: 1000 });
  const child = await createSubClient(t, root, 0);
  const made: string[] = [];
  for (let i = 0; i < 5; i++)
    made.push(expectOk(await move(root, root.clientId, child.clientId, 1)).transfer.id);
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const page: Listing = expectOk(await list(root, `?per_page=2${cursor ? `&cursor=${cursor}` : ""}`));
    assert.equal(page.per_page, 2);
    seen.push(...page.transfers.map((x) => x.id));
    cursor = page.next_cursor;
    pages += 1;
    // Arrivals during the walk are newer than its position: they do not shift it.
    if (pages === 1) expectOk(await move(root, child.clientId, root.clientId, 1));
  } while (cursor);
  assert.deepEqual(seen, [...made].reverse());
  assert.equal(pages, 3);

  const first = expectOk(await list(root, "?per_page=2"));
  assert.ok(first.next_cursor);
  const other = expectError(await list(root, `?per_page=3&cursor=${first.next_cursor}`), 1000, 400);
  assert.match(other.body.message, /^cursor: /);
  expectError(
    await list(root, `?per_page=2&client_id=${child.clientId}&cursor=${first.next_cursor}`),
    1000,
    400,
  );
  expectError(await list(child, `?per_page=2&cursor=${first.next_cursor}`), 1000, 400);
  expectError(await list(root, "?cursor=not-a-cursor!"), 1000, 400);
  expectError(
    await list(
      root,
      `?cursor=${Buffer.from('{"t":"2025-02-30T00:00:00.000000Z","i":"x"}').toString("base64url")}`,
    ),
    1000,
    400,
  );
});

test("the OpenAPI document: operation ids, the Idempotency-Key header, 429 and the largest amount", async () => {
  const spec = (await t.app.inject({ url: "/openapi.json" })).json() as {
    paths: Record<string, Record<string, Record<string, unknown>>>;
  };
  const path = spec.paths["/v1/clients/transfers"];
  assert.ok(path?.post && path.get);
  const post = path.post as {
    operationId: string;
    tags: string[];
    parameters: Array<{ in: string; name: string }>;
    responses: Record<string, unknown>;
    requestBody: {
      content: Record<string, { schema: { properties: Record<string, { maximum?: number }> } }>;
    };
  };
  assert.equal(post.operationId, "createClientTransfer");
  assert.deepEqual(post.tags, ["clients"]);
  assert.ok(post.parameters.some((p) => p.in === "header" && p.name === "idempotency-key"));
  assert.ok(post.responses["429"], "rate limited like the other money routes");
  assert.equal(
    post.requestBody.content["application/json"]?.schema.properties.amount?.maximum,
    1_000_000_000,
  );
  assert.equal((path.get as { operationId: string }).operationId, "listClientTransfers");
});

test("each side that is not the caller gets its own event through GET /v1/events: its money and its own balance, not a sibling's", async () => {
  // A sub-client's integration learns by webhook that its balance was funded or swept, and
  // learns no more than its own listing shows.
  const parent = await createTenant(t, { available: 1000 });
  const left = await createSubClient(t, parent, 100);
  const right = await createSubClient(t, parent, 50);
  const answer = expectOk(await move(parent, left.clientId, right.clientId, 30, { description: "Reparto" }));
  type Feed = { events: Array<{ type: string; client_id: string; data: Record<string, unknown> }> };
  const feedOf = async (who: Tenant) =>
    expectOk(
      await call<Feed>(
        t.app,
        "GET",
        "/v1/events?type=client.transfer,client.transfer.credited,client.transfer.debited",
        { token: who.token },
      ),
    ).events;
  // Each side's event holds the transfer exactly as its own listing shows it: the sibling and the
  // parent that made it are outside its subtree, so null.
  const listed = async (who: Tenant) => expectOk(await list(who)).transfers[0];
  assert.deepEqual(await listed(left), {
    ...answer.transfer,
    to_client_id: null,
    created_by_client_id: null,
  });
  assert.deepEqual(
    (await feedOf(left)).map((e) => [e.type, e.client_id, e.data]),
    [["client.transfer.debited", left.clientId, { transfer: await listed(left), available: 70 }]],
  );
  assert.deepEqual(
    (await feedOf(right)).map((e) => [e.type, e.client_id, e.data]),
    [["client.transfer.credited", right.clientId, { transfer: await listed(right), available: 80 }]],
  );
  assert.equal((await listed(right))?.from_client_id, null);
  // The parent sees its own event (both balances) and, in its subtree, each side's.
  assert.deepEqual(
    (await feedOf(parent)).map((e) => [e.type, e.client_id]),
    [
      ["client.transfer", parent.clientId],
      ["client.transfer.debited", left.clientId],
      ["client.transfer.credited", right.clientId],
    ],
  );
  // The caller's own side gets no second event: funding a sub-client gives the sub-client one.
  expectOk(await move(parent, parent.clientId, left.clientId, 5));
  assert.deepEqual(
    (await feedOf(parent)).slice(3).map((e) => [e.type, e.client_id]),
    [
      ["client.transfer", parent.clientId],
      ["client.transfer.credited", left.clientId],
    ],
  );
});
