// Proves sub-client creation (contract 4.4): funding from the caller's balance in one entry, the
// minimum-balance rule, login with the new key, alias uniqueness per organisation, depth, events.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { balanceOf, checkInvariants } from "../src/ledger/ledger.ts";
import { limits } from "../src/limits.ts";
import {
  call,
  createSubClient,
  createTenant,
  expectError,
  expectOk,
  login,
  type Tenant,
} from "./helpers/api.ts";
import { ownLogs, startTestApp, type TestApp } from "./helpers/harness.ts";
import { subclientBody } from "./helpers/people.ts";

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

interface Subclient {
  subclient: {
    id: string;
    code: string;
    name: string;
    available: number;
    rfc: string;
    api_client: { id: string; name: string; alias: string; description: string; api_key: string };
  };
}

const create = (token: string, body: Record<string, unknown>, key?: string) =>
  call<Subclient>(t.app, "POST", "/v1/clients", {
    token,
    body,
    ...(key ? { headers: { "idempotency-key": key } } : {}),
  });

async function eventsOf(type: string, clientId: string) {
  return t.ctx.db
    .selectFrom("events")
    .select(["data"])
    .where("type", "=", type)
    .where("client_id", "=", clientId)
    .orderBy("seq")
    .execute();
}

async function clientCount(): Promise<number> {
  const row = await t.ctx.db
    .selectFrom("clients")
    .select((eb) => eb.fn.countAll<bigint>().as("n"))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

test("creates a funded sub-client whose API key logs in; the caller pays in one balanced entry", async () => {
  const parent = await createTenant(t, { available: 1000 });
  const body = subclientBody({ available: 250.75, rfc: "cno200101ab1", api_key_description: "Cobros" });
  const data = expectOk(await create(parent.token, body));

  assert.deepEqual(Object.keys(data.subclient).sort(), [
    "api_client",
    "available",
    "code",
    "id",
    "name",
    "rfc",
  ]);
  assert.deepEqual(Object.keys(data.subclient.api_client).sort(), [
    "alias",
    "api_key",
    "description",
    "id",
    "name",
  ]);
  const { subclient } = data;
  assert.equal(subclient.name, "Comercial Norte");
  assert.equal(subclient.available, 250.75);
  assert.equal(subclient.rfc, "CNO200101AB1");
  assert.match(subclient.code, /^C[0-9]{7}$/);
  assert.equal(subclient.api_client.name, "Norte production");
  assert.equal(subclient.api_client.alias, body.alias);
  assert.equal(subclient.api_client.description, "Cobros");
  assert.match(subclient.api_client.api_key, /^ek_/);
  assert.ok(!JSON.stringify(data).includes(String(body.api_key_password)));

  assert.equal(await balanceOf(t.ctx.db, parent.clientId), 74925n);
  assert.equal(await balanceOf(t.ctx.db, subclient.id), 25075n);
  const entries = await t.ctx.db
    .selectFrom("journal_entries")
    .select(["kind", "client_id"])
    .where("kind", "=", "SUBCLIENT_FUNDING")
    .where("client_id", "=", parent.clientId)
    .execute();
  assert.equal(entries.length, 1);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);

  const row = await t.ctx.db
    .selectFrom("clients")
    .select(["parent_id", "root_id", "lineage", "contact", "legal_representative", "state"])
    .where("id", "=", subclient.id)
    .executeTakeFirstOrThrow();
  assert.equal(row.parent_id, parent.clientId);
  assert.equal(row.root_id, parent.clientId);
  assert.deepEqual(row.lineage, [parent.clientId, subclient.id]);
  assert.equal((row.contact as { email: string }).email, "ana@norte.example.mx");
  assert.equal(row.legal_representative, null);

  // The new key logs in with the password that was sent, and acts as the new client.
  const token = await login(t.app, subclient.api_client.api_key, String(body.api_key_password));
  const me = expectOk(
    await call<{ client: { id: string } }>(t.app, "POST", "/v1/auth/login", {
      body: { api_client: { api_key: subclient.api_client.api_key, password: body.api_key_password } },
    }),
  );
  assert.equal(me.client.id, subclient.id);
  assert.ok(token);
});

test("client.created: the parent's event, shaped like 2.7, with no credential", async () => {
  const parent = await createTenant(t, { available: 10 });
  const body = subclientBody({ available: 1 });
  const { subclient } = expectOk(await create(parent.token, body));
  const events = await eventsOf("client.created", parent.clientId);
  assert.equal(events.length, 1);
  const { api_key: _loginId, ...apiClient } = subclient.api_client;
  assert.deepEqual(events[0]?.data, { ...subclient, api_client: apiClient });
  const text = JSON.stringify(events[0]?.data);
  assert.ok(!text.includes(String(body.api_key_password)) && !text.includes(subclient.api_client.api_key));
});

test("available may be 0: the client starts empty and no entry is posted", async () => {
  const parent = await createTenant(t);
  const { subclient } = expectOk(await create(parent.token, subclientBody({ available: 0 })));
  assert.equal(subclient.available, 0);
  assert.equal(subclient.api_client.description, "");
  assert.equal(await balanceOf(t.ctx.db, subclient.id), 0n);
  const entries = await t.ctx.db
    .selectFrom("journal_entries")
    .select("id")
    .where("client_id", "=", parent.clientId)
    .execute();
  assert.equal(entries.length, 0);
});

test("the caller's balance may not fall below its minimum balance: 5102 and nothing is created", async () => {
  const parent = await createTenant(t, { available: 100 });
  await t.ctx.db
    .updateTable("clients")
    .set({ min_balance_cents: 4000n })
    .where("id", "=", parent.clientId)
    .execute();
  const before = await clientCount();
  expectError(await create(parent.token, subclientBody({ available: 60.01 })), 5102, 422);
  expectError(await create(parent.token, subclientBody({ available: 1000 })), 5102, 422);
  assert.equal(await clientCount(), before);
  assert.equal(await balanceOf(t.ctx.db, parent.clientId), 10000n);
  assert.equal((await eventsOf("client.created", parent.clientId)).length, 0);
  // Exactly down to the floor is allowed.
  expectOk(await create(parent.token, subclientBody({ available: 60 })));
  assert.equal(await balanceOf(t.ctx.db, parent.clientId), 4000n);
  // Below the floor already, even an empty sub-client is refused.
  await t.ctx.db
    .updateTable("clients")
    .set({ min_balance_cents: 5000n })
    .where("id", "=", parent.clientId)
    .execute();
  expectError(await create(parent.token, subclientBody({ available: 0 })), 5102, 422);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("an alias is unique within an organisation, ignoring case; other organisations may repeat it", async () => {
  const parent = await createTenant(t, { available: 10 });
  const other = await createTenant(t, { available: 10 });
  const { subclient } = expectOk(await create(parent.token, subclientBody({ alias: "Norte", available: 1 })));
  expectError(await create(parent.token, subclientBody({ alias: "NORTE", available: 0 })), 4101, 409);
  expectOk(await create(other.token, subclientBody({ alias: "norte", available: 0 })));
  // A grandchild collides with its grandparent's other children too (one organisation).
  const child = await login(t.app, subclient.api_client.api_key, "correct horse battery");
  expectError(await create(child, subclientBody({ alias: "norte", available: 0 })), 4101, 409);
  assert.equal(await balanceOf(t.ctx.db, parent.clientId), 900n);
  // A taken alias is decided on the caller's data: the key's final answer, replayed as such.
  const taken = subclientBody({ alias: "norte", available: 1 });
  expectError(await create(parent.token, taken, "alias-taken-1"), 4101, 409);
  const replay = await create(parent.token, taken, "alias-taken-1");
  expectError(replay, 4101, 409);
  assert.equal(replay.headers["idempotent-replayed"], "true");
  expectError(
    await create(parent.token, subclientBody({ alias: "sur", available: 1 }), "alias-taken-1"),
    4001,
    409,
  );
  assert.equal(await balanceOf(t.ctx.db, parent.clientId), 900n);
  // Regression (HTTP audit): aliases that read alike were two aliases: a precomposed É against E
  // and a combining accent, full-width letters; and invisible characters made any alias new.
  expectOk(await create(parent.token, subclientBody({ alias: "CAFÉ", available: 0 })));
  for (const alike of ["CAFE\u0301", "ｃａｆé"]) {
    expectError(await create(parent.token, subclientBody({ alias: alike, available: 0 })), 4101, 409);
  }
  for (const invisible of ["NORTE\u200B", "\u202ENORTE", "SUR\u0007"]) {
    const refused = expectError(
      await create(parent.token, subclientBody({ alias: invisible, available: 0 })),
      1000,
      400,
    );
    assert.match(refused.body.message, /^alias: must not contain control or invisible characters/);
  }
});

test("a sub-client creates its own sub-clients down to the depth limit (5103)", async () => {
  let caller: Pick<Tenant, "token" | "clientId"> = await createTenant(t, { available: 100 });
  const lineage = [caller.clientId];
  for (let depth = 2; depth <= limits.clientDepthMax; depth++) {
    const body = subclientBody({ available: 100 - depth });
    const { subclient } = expectOk(await create(caller.token, body));
    lineage.push(subclient.id);
    caller = {
      clientId: subclient.id,
      token: await login(t.app, subclient.api_client.api_key, "correct horse battery"),
    };
  }
  const deepest = await t.ctx.db
    .selectFrom("clients")
    .select("lineage")
    .where("id", "=", caller.clientId)
    .executeTakeFirstOrThrow();
  assert.deepEqual(deepest.lineage, lineage);
  expectError(await create(caller.token, subclientBody({ available: 0 })), 5103, 422);
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("invalid requests: 1000 naming the field", async () => {
  const parent = await createTenant(t, { available: 10 });
  const minLength = t.config.apiKeyPasswordMinLength;
  const cases: Array<[Record<string, unknown>, string, string]> = [
    [{ api_key_password: "x".repeat(minLength - 1) }, "api_key_password", "minLength"],
    [{ api_key_password: "x".repeat(limits.apiKeyPasswordLengthMax + 1) }, "api_key_password", "maxLength"],
    [{ rfc: "ABC123" }, "rfc", "minLength"],
    [{ rfc: "CNO201301AB1" }, "rfc", "rfc"],
    [{ state: "Narnia" }, "state", "enum"],
    [{ available: 1.001 }, "available", "x-decimals"],
    [{ available: -1 }, "available", "minimum"],
    [{ alias: "ab" }, "alias", "minLength"],
    [{ name: "Four" }, "name", "minLength"],
    [{ contact_telephone_country_code: "1" }, "contact_telephone_country_code", "pattern"],
    [{ phone: "55-1234-5678" }, "phone", "pattern"],
    [{ legal_representative_email: "nope" }, "legal_representative_email", "format"],
    [{ parent_id: parent.clientId }, "parent_id", "additionalProperties"],
  ];
  for (const [override, field, rule] of cases) {
    const response = expectError(await create(parent.token, subclientBody(override)), 1000, 400);
    const details = (
      response.body.data as { details: Array<{ field: string; rule: string; message: string }> }
    ).details;
    assert.ok(
      details.some((d) => d.field === field && d.rule === rule),
      `${JSON.stringify(override)}: ${JSON.stringify(details)}`,
    );
    if (field === "state") assert.match(response.body.message, /state catalog \(GET \/v1\/catalogs\/state\)/);
  }
  // The RFC message states what isValidRfc takes: the homoclave is optional for a person's
  // 4-letter RFC (regression: it said "a 3-character homoclave" though GODE561231 is accepted).
  const rfcMessage =
    "rfc: must be an RFC: 3-4 letters, a real date YYMMDD, and an optional 3-character homoclave (required for a company's 3-letter RFC)";
  for (const rfc of ["CNO201301AB1", "CNO2001011", "GODE561231G"]) {
    const refused = expectError(await create(parent.token, subclientBody({ rfc })), 1000, 400);
    assert.equal(refused.body.message, rfcMessage, rfc);
  }
  const person = expectOk(await create(parent.token, subclientBody({ rfc: "gode561231", available: 0 }))) as {
    subclient: { rfc: string };
  };
  assert.equal(person.subclient.rfc, "GODE561231");
  const missing = subclientBody();
  delete missing.api_key_password;
  expectError(await create(parent.token, missing), 1000, 400);
  assert.equal(await balanceOf(t.ctx.db, parent.clientId), 1000n);
});

test("the OpenAPI document shows the configured password bounds", async () => {
  const spec = (await t.app.inject({ url: "/openapi.json" })).json() as {
    paths: Record<
      string,
      {
        post: {
          requestBody: {
            content: Record<
              string,
              { schema: { properties: Record<string, { minLength: number; maxLength: number }> } }
            >;
          };
        };
      }
    >;
  };
  const schema = spec.paths["/v1/clients"]?.post.requestBody.content["application/json"]?.schema;
  assert.equal(schema?.properties.api_key_password?.minLength, t.config.apiKeyPasswordMinLength);
  assert.equal(schema?.properties.api_key_password?.maxLength, 30);
});

test("Idempotency-Key: a repeat replays the first answer; concurrent duplicates create one client", async () => {
  const parent = await createTenant(t, { available: 100 });
  const body = subclientBody({ available: 10 });
  const first = await create(parent.token, body, "sub-1");
  const again = await create(parent.token, body, "sub-1");
  assert.deepEqual(again.body, first.body);
  assert.equal(again.headers["idempotent-replayed"], "true");
  expectError(await create(parent.token, { ...body, available: 11 }, "sub-1"), 4001, 409);

  const raced = subclientBody({ available: 5 });
  const responses = await Promise.all(
    Array.from({ length: 6 }, () => create(parent.token, raced, "sub-race")),
  );
  const ids = new Set(responses.map((r) => expectOk(r).subclient.id));
  assert.equal(ids.size, 1);
  assert.equal(await balanceOf(t.ctx.db, parent.clientId), 8500n);
  assert.equal((await eventsOf("client.created", parent.clientId)).length, 2);
});

test("no password reaches a log line", async () => {
  const parent = await createTenant(t, { available: 1 });
  const password = `never-logged-${Date.now()}`;
  expectOk(await create(parent.token, subclientBody({ available: 0, api_key_password: password })));
  expectError(
    await create(parent.token, subclientBody({ available: 0, api_key_password: password, state: "X" })),
    1000,
  );
  const logs = ownLogs();
  assert.match(logs, /\/v1\/clients/, "requests are logged");
  assert.ok(!logs.includes(password), "a log line holds the password");
});

test("GET /v1/clients/balance, GET /v1/clients (direct sub-clients, paginated) and GET /v1/clients/{id} (subtree only)", async () => {
  const parent = await createTenant(t, { available: 1000 });
  const stranger = await createTenant(t);
  const children = [];
  for (const available of [100, 50.5, 0]) children.push(await createSubClient(t, parent, available));
  const [first, second] = children;
  assert.ok(first && second);
  const grandchild = await createSubClient(t, first, 10);

  const balance = expectOk(
    await call<{ balance: Record<string, unknown> }>(t.app, "GET", "/v1/clients/balance", {
      token: parent.token,
    }),
  );
  assert.deepEqual(balance.balance, {
    client_id: parent.clientId,
    available: 849.5,
    min_balance: 0,
    currency: { code: "484", description: "MXN" },
  });
  const firstBalance = expectOk(
    await call<{ balance: { available: number } }>(t.app, "GET", "/v1/clients/balance", {
      token: first.token,
    }),
  );
  assert.equal(firstBalance.balance.available, 90);

  type List = {
    clients: { items: Array<Record<string, unknown>>; page: number; pages: number; total: number };
  };
  const page1 = expectOk(await call<List>(t.app, "GET", "/v1/clients?per_page=2", { token: parent.token }));
  const page2 = expectOk(
    await call<List>(t.app, "GET", "/v1/clients?per_page=2&page=2", { token: parent.token }),
  );
  assert.deepEqual(
    [page1.clients.total, page1.clients.pages, page1.clients.page, page2.clients.page],
    [3, 2, 1, 2],
  );
  const listed = [...page1.clients.items, ...page2.clients.items];
  assert.deepEqual(
    listed.map((c) => c.id),
    children.map((c) => c.clientId),
  );
  assert.deepEqual(
    listed.map((c) => c.available),
    [90, 50.5, 0],
  );
  assert.deepEqual(Object.keys(listed[0] ?? {}).sort(), [
    "alias",
    "available",
    "code",
    "created_at",
    "email",
    "id",
    "min_balance",
    "name",
    "parent_id",
    "rfc",
    "status",
  ]);
  assert.equal(listed[0]?.parent_id, parent.clientId);
  // Only direct children: the grandchild is not listed, and a leaf has none.
  assert.ok(!listed.some((c) => c.id === grandchild.clientId));
  assert.equal(
    expectOk(await call<List>(t.app, "GET", "/v1/clients", { token: grandchild.token })).clients.total,
    0,
  );

  const one = expectOk(
    await call<{ client: Record<string, unknown> }>(t.app, "GET", `/v1/clients/${grandchild.clientId}`, {
      token: parent.token,
    }),
  );
  assert.equal(one.client.available, 10);
  assert.equal(one.client.parent_id, first.clientId);
  expectOk(await call(t.app, "GET", `/v1/clients/${parent.clientId}`, { token: parent.token }));
  for (const [who, id] of [
    [first, parent.clientId],
    [first, second.clientId],
    [stranger, first.clientId],
    [grandchild, first.clientId],
  ] as const) {
    expectError(await call(t.app, "GET", `/v1/clients/${id}`, { token: who.token }), 3101, 404);
  }
  expectError(await call(t.app, "GET", "/v1/clients/not-a-uuid", { token: parent.token }), 1000, 400);
  expectError(
    await call(t.app, "GET", `/v1/clients?per_page=${limits.pageSizeMax + 1}`, { token: parent.token }),
    1000,
    400,
  );
});

test("a parent disables a sub-client: its keys and those below it answer 2006 until enabled again", async () => {
  const parent = await createTenant(t, { available: 10 });
  const { subclient: child } = expectOk(await create(parent.token, subclientBody({ available: 2 })));
  const childToken = await login(t.app, child.api_client.api_key, "correct horse battery");
  const { subclient: grandchild } = expectOk(await create(childToken, subclientBody({ available: 1 })));
  const grandchildToken = await login(t.app, grandchild.api_client.api_key, "correct horse battery");
  const { subclient: sibling } = expectOk(await create(parent.token, subclientBody({ available: 1 })));
  const siblingToken = await login(t.app, sibling.api_client.api_key, "correct horse battery");
  const setStatus = (token: string, id: string, status: string) =>
    call<{ client: { id: string; status: string }; previous_status: string }>(
      t.app,
      "PUT",
      `/v1/clients/${id}/status`,
      { token, body: { status } },
    );
  const balance = (token: string) => call(t.app, "GET", "/v1/clients/balance", { token });

  const disabled = expectOk(await setStatus(parent.token, child.id, "DISABLED"));
  assert.equal(disabled.client.status, "DISABLED");
  assert.equal(disabled.previous_status, "ACTIVE");
  // Tokens already handed out stop at once in this process; logins are refused too; the whole
  // subtree below the disabled client stops with it.
  expectError(await balance(childToken), 2006, 401);
  expectError(await balance(grandchildToken), 2006, 401);
  const relogin = await call(t.app, "POST", "/v1/auth/login", {
    body: { api_client: { api_key: grandchild.api_client.api_key, password: "correct horse battery" } },
  });
  expectError(relogin, 2006, 401);
  expectOk(await balance(siblingToken));
  // Incoming SPEI to a CLABE below the disabled client is returned (cause 02).
  const { clabe } = await t.ctx.db
    .selectFrom("collection_accounts")
    .select("clabe")
    .where("client_id", "=", grandchild.id)
    .executeTakeFirstOrThrow();
  const incoming = expectOk(
    await call<{ mensaje: string; causa_devolucion: string }>(t.app, "POST", "/v1/sandbox/spei/incoming", {
      token: parent.token,
      body: { clabe, amount: 5 },
    }),
  );
  assert.deepEqual([incoming.mensaje, incoming.causa_devolucion], ["devolver", "02"]);
  // Money stays where it is.
  assert.equal(await balanceOf(t.ctx.db, child.id), 100n);
  // Again: the same answer, no second event.
  assert.equal(expectOk(await setStatus(parent.token, child.id, "DISABLED")).previous_status, "DISABLED");
  const events = await eventsOf("client.status_changed", parent.clientId);
  assert.equal(events.length, 1);
  assert.deepEqual(events[0]?.data, disabled);

  // Only an ancestor: not the client itself, not a sibling, not a child on its parent.
  expectError(await setStatus(siblingToken, sibling.id, "DISABLED"), 5104, 422);
  expectError(await setStatus(siblingToken, child.id, "DISABLED"), 3101, 404);
  expectError(await setStatus(siblingToken, parent.clientId, "DISABLED"), 3101, 404);
  expectError(await setStatus(parent.token, child.id, "SUSPENDED"), 1000, 400);

  expectOk(await setStatus(parent.token, child.id, "ACTIVE"));
  expectOk(await balance(childToken));
  expectOk(await balance(grandchildToken));
  assert.deepEqual(await checkInvariants(t.ctx.db), []);
});

test("a disable holds below the ancestor that decided it: a lower ancestor cannot enable the client again (5107)", async () => {
  const root = await createTenant(t, { available: 10 });
  const parent = await createSubClient(t, root, 5);
  const child = await createSubClient(t, parent, 1);
  const setStatus = (token: string, status: string) =>
    call(t.app, "PUT", `/v1/clients/${child.clientId}/status`, { token, body: { status } });
  // The root freezes the grandchild; its parent, still active, may not lift that (and then pay in).
  expectOk(await setStatus(root.token, "DISABLED"));
  expectError(await setStatus(parent.token, "ACTIVE"), 5107, 422);
  expectError(await balanceCall(child.token), 2006, 401);
  // Disabling it again is no change: the root's decision still holds.
  expectOk(await setStatus(parent.token, "DISABLED"));
  expectError(await setStatus(parent.token, "ACTIVE"), 5107, 422);
  expectOk(await setStatus(root.token, "ACTIVE"));
  expectOk(await balanceCall(child.token));
  // A disable the parent decided, the parent lifts; and so may the root, above it.
  expectOk(await setStatus(parent.token, "DISABLED"));
  expectOk(await setStatus(root.token, "ACTIVE"));
  expectOk(await setStatus(parent.token, "DISABLED"));
  expectOk(await setStatus(parent.token, "ACTIVE"));
  expectOk(await balanceCall(child.token));
});

function balanceCall(token: string) {
  return call(t.app, "GET", "/v1/clients/balance", { token });
}
