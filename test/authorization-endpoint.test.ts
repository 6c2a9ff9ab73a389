// Proves /v1/clients/authorization_endpoint: a client registers, replaces, reads, rotates and removes
// its own decision endpoint (secret shown once, stored sealed), every bad input is a 1000, and
// sub-clients inherit the nearest ancestor's endpoint without seeing its URL or changing it.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { open } from "../src/crypto/vault.ts";
import {
  effectiveEndpoint,
  effectiveEndpoints,
  endpointSecretContext,
} from "../src/modules/decisions/service.ts";
import { call, createSubClient, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

const path = "/v1/clients/authorization_endpoint";

interface View {
  client_id: string;
  inherited: boolean;
  url: string | null;
  timeout_ms: number;
  stand_in: string;
  created_at: string;
  updated_at: string;
}
type Put = { authorization_endpoint: View & { secret: string | null } };
type Rotated = { authorization_endpoint: View; secret: string | null; previous_secret_expires_at: string };

const put = (tenant: Tenant, body: unknown, headers?: Record<string, string>, app = t.app) =>
  call<Put>(app, "PUT", path, { token: tenant.token, body, ...(headers ? { headers } : {}) });
const get = (tenant: Tenant) =>
  call<{ authorization_endpoint: View }>(t.app, "GET", path, { token: tenant.token });
const remove = (tenant: Tenant) => call(t.app, "DELETE", path, { token: tenant.token });

async function sealedSecret(clientId: string): Promise<string> {
  const row = await t.ctx.db
    .selectFrom("authorization_endpoints")
    .select("secret_sealed")
    .where("client_id", "=", clientId)
    .executeTakeFirstOrThrow();
  return open(t.ctx.keys.vault, row.secret_sealed, endpointSecretContext(clientId));
}

test("first PUT: defaults, a whsec_ secret shown once and stored sealed; GET never shows it", async () => {
  const tenant = await createTenant(t);
  const response = await put(tenant, { url: "https://decide.example.mx/emisor" });
  const { secret, ...view } = expectOk(response).authorization_endpoint;
  assert.equal(response.headers["cache-control"], "no-store");
  assert.match(secret ?? "", /^whsec_[A-Za-z0-9+/]{43}=$/);
  assert.deepEqual(
    { ...view, created_at: "", updated_at: "" },
    {
      client_id: tenant.clientId,
      inherited: false,
      url: "https://decide.example.mx/emisor",
      timeout_ms: 1500,
      stand_in: "DECLINE",
      created_at: "",
      updated_at: "",
    },
  );
  assert.equal(await sealedSecret(tenant.clientId), secret);
  const row = await t.ctx.db
    .selectFrom("authorization_endpoints")
    .select("secret_sealed")
    .where("client_id", "=", tenant.clientId)
    .executeTakeFirstOrThrow();
  assert.ok(!row.secret_sealed.includes(secret ?? "-"));
  const read = expectOk(await get(tenant)).authorization_endpoint;
  assert.deepEqual(read, view);
  assert.ok(!("secret" in read));
  const effective = await effectiveEndpoint(t.ctx.db, t.ctx.keys.vault, tenant.clientId);
  assert.deepEqual(effective, {
    ownerClientId: tenant.clientId,
    url: "https://decide.example.mx/emisor",
    timeoutMs: 1500,
    standIn: "DECLINE",
    secret,
    retiredSecrets: [],
  });
});

test("a later PUT replaces the settings (left out: the defaults) and keeps the secret", async () => {
  const tenant = await createTenant(t);
  const first = expectOk(
    await put(tenant, { url: "https://a.example.mx/", timeout_ms: 800, stand_in: "APPROVE" }),
  );
  assert.equal(first.authorization_endpoint.timeout_ms, 800);
  assert.equal(first.authorization_endpoint.stand_in, "APPROVE");
  const second = expectOk(await put(tenant, { url: "https://b.example.mx/decide", timeout_ms: 3000 }));
  assert.equal(second.authorization_endpoint.secret, null);
  assert.equal(second.authorization_endpoint.url, "https://b.example.mx/decide");
  assert.equal(second.authorization_endpoint.timeout_ms, 3000);
  assert.equal(second.authorization_endpoint.stand_in, "DECLINE");
  assert.equal(second.authorization_endpoint.created_at, first.authorization_endpoint.created_at);
  assert.equal(await sealedSecret(tenant.clientId), first.authorization_endpoint.secret);
  const third = expectOk(await put(tenant, { url: "https://b.example.mx/decide" }));
  assert.equal(third.authorization_endpoint.timeout_ms, 1500);
});

test("Idempotency-Key: the same request replays without the secret; another body is 4001", async () => {
  const tenant = await createTenant(t);
  const body = { url: "https://decide.example.mx/", stand_in: "APPROVE" };
  const headers = { "idempotency-key": "decide-001" };
  const first = expectOk(await put(tenant, body, headers));
  assert.ok(first.authorization_endpoint.secret);
  const replay = await put(tenant, body, headers);
  assert.equal(replay.headers["idempotent-replayed"], "true");
  assert.deepEqual(expectOk(replay), {
    authorization_endpoint: { ...first.authorization_endpoint, secret: null },
  });
  expectError(await put(tenant, { ...body, stand_in: "DECLINE" }, headers), 4001, 409);
});

test("every bad input is a 1000 naming its field; nothing is registered", async () => {
  const tenant = await createTenant(t);
  const cases: [unknown, string][] = [
    [{}, "url"],
    [{ url: "" }, "url"],
    [{ url: "not a url" }, "url"],
    [{ url: "ftp://decide.example.mx/" }, "url"],
    [{ url: "http://decide.example.mx/" }, "url"],
    [{ url: "https://user:pw@decide.example.mx/" }, "url"],
    [{ url: "https://10.0.0.1/decide" }, "url"],
    [{ url: "https://169.254.169.254/" }, "url"],
    [{ url: `https://decide.example.mx/${"a".repeat(2048)}` }, "url"],
    [{ url: 5 }, "url"],
    [{ url: "https://decide.example.mx/", timeout_ms: 99 }, "timeout_ms"],
    [{ url: "https://decide.example.mx/", timeout_ms: 3001 }, "timeout_ms"],
    [{ url: "https://decide.example.mx/", timeout_ms: 1500.5 }, "timeout_ms"],
    [{ url: "https://decide.example.mx/", timeout_ms: "1500" }, "timeout_ms"],
    [{ url: "https://decide.example.mx/", stand_in: "MAYBE" }, "stand_in"],
    [{ url: "https://decide.example.mx/", stand_in: "approve" }, "stand_in"],
    [{ url: "https://decide.example.mx/", secret: "whsec_mine" }, "secret"],
  ];
  for (const [body, field] of cases) {
    const response = expectError(await put(tenant, body), 1000, 400);
    const details = (response.body.data as { details: { field: string }[] }).details;
    assert.ok(
      details.some(
        (d) => d.field === field || d.field.endsWith(`.${field}`) || d.field.endsWith(`/${field}`),
      ),
      `${JSON.stringify(body)}: ${JSON.stringify(details)}`,
    );
  }
  expectError(await call(t.app, "PUT", path, { token: tenant.token, raw: "[" }), 1001, 400);
  expectError(await get(tenant), 3810, 404);
  // Sandbox (these tests' default) lets a developer receive on localhost, over http.
  expectOk(await put(tenant, { url: "http://localhost:4000/decide", timeout_ms: 100 }));
  expectOk(await put(tenant, { url: "http://127.0.0.1:4000/decide", timeout_ms: 100 }));
});

test("outside sandbox: https only, and never a local address", async () => {
  const live = await startTestApp({ sandbox: false });
  try {
    const tenant = await createTenant(live);
    for (const url of ["http://localhost:4000/decide", "http://127.0.0.1:4000/", "https://localhost/decide"])
      expectError(await put(tenant, { url }, undefined, live.app), 1000, 400);
    expectOk(await put(tenant, { url: "https://decide.example.mx/" }, undefined, live.app));
  } finally {
    await live.close();
  }
});

test("inheritance: the nearest ancestor's endpoint, its URL not shown; own endpoints and deletes stay one's own", async () => {
  const root = await createTenant(t, { available: 1_000 });
  const north = await createSubClient(t, root, 100);
  const branch = await createSubClient(t, north, 10);
  const south = await createSubClient(t, root, 100);
  for (const client of [root, north, branch, south]) expectError(await get(client), 3810, 404);
  const rootSecret = expectOk(await put(root, { url: "https://root.example.mx/", stand_in: "APPROVE" }))
    .authorization_endpoint.secret;
  for (const client of [north, branch, south]) {
    const view = expectOk(await get(client)).authorization_endpoint;
    assert.deepEqual(
      { client_id: view.client_id, inherited: view.inherited, url: view.url, stand_in: view.stand_in },
      { client_id: root.clientId, inherited: true, url: null, stand_in: "APPROVE" },
    );
  }
  // A sub-client's PUT registers its own; its parent's endpoint does not change.
  const northSecret = expectOk(await put(north, { url: "https://north.example.mx/", timeout_ms: 500 }))
    .authorization_endpoint.secret;
  assert.ok(northSecret && northSecret !== rootSecret);
  assert.equal(expectOk(await get(root)).authorization_endpoint.url, "https://root.example.mx/");
  assert.equal(await sealedSecret(root.clientId), rootSecret);
  assert.equal(expectOk(await get(branch)).authorization_endpoint.client_id, north.clientId);
  assert.equal(expectOk(await get(south)).authorization_endpoint.client_id, root.clientId);
  const batch = await effectiveEndpoints(t.ctx.db, t.ctx.keys.vault, [
    root.clientId,
    north.clientId,
    branch.clientId,
    south.clientId,
  ]);
  assert.deepEqual(
    [...batch].map(([client, e]) => [client, e.ownerClientId, e.secret]).sort(),
    [
      [root.clientId, root.clientId, rootSecret],
      [north.clientId, north.clientId, northSecret],
      [branch.clientId, north.clientId, northSecret],
      [south.clientId, root.clientId, rootSecret],
    ].sort(),
  );
  // Deleting is of one's own only: an inherited endpoint is 3811, and stays.
  expectError(await remove(south), 3811, 404);
  expectError(await remove(branch), 3811, 404);
  assert.deepEqual(expectOk(await remove(north)), {
    authorization_endpoint: { client_id: north.clientId, deleted: true },
  });
  expectError(await remove(north), 3811, 404);
  assert.equal(expectOk(await get(north)).authorization_endpoint.client_id, root.clientId);
  assert.equal(expectOk(await get(branch)).authorization_endpoint.client_id, root.clientId);
  // Another organisation inherits nothing from this one.
  const stranger = await createTenant(t);
  expectError(await get(stranger), 3810, 404);
  assert.equal(await effectiveEndpoint(t.ctx.db, t.ctx.keys.vault, stranger.clientId), null);
  expectOk(await remove(root));
  for (const client of [root, north, branch, south]) expectError(await get(client), 3810, 404);
});

test("rotate: a new secret once, the old one still signing for 24 hours; only one's own endpoint", async () => {
  const root = await createTenant(t);
  const sub = await createSubClient(t, root);
  const old = expectOk(await put(root, { url: "https://decide.example.mx/" })).authorization_endpoint.secret;
  const headers = { "idempotency-key": "rotate-001" };
  const response = await call<Rotated>(t.app, "POST", `${path}/rotate_secret`, {
    token: root.token,
    headers,
  });
  const rotated = expectOk(response);
  assert.equal(response.headers["cache-control"], "no-store");
  assert.match(rotated.secret ?? "", /^whsec_/);
  assert.notEqual(rotated.secret, old);
  const grace = Date.parse(rotated.previous_secret_expires_at) - Date.now();
  assert.ok(grace > 23.9 * 3600_000 && grace <= 24 * 3600_000);
  const effective = await effectiveEndpoint(t.ctx.db, t.ctx.keys.vault, sub.clientId);
  assert.equal(effective?.secret, rotated.secret);
  assert.deepEqual(effective?.retiredSecrets, [old]);
  const replay = expectOk(
    await call<Rotated>(t.app, "POST", `${path}/rotate_secret`, { token: root.token, headers }),
  );
  assert.equal(replay.secret, null);
  assert.equal(await sealedSecret(root.clientId), rotated.secret);
  expectError(await call(t.app, "POST", `${path}/rotate_secret`, { token: sub.token }), 3811, 404);
});

test("every operation needs a token", async () => {
  for (const [method, url] of [
    ["PUT", path],
    ["GET", path],
    ["DELETE", path],
    ["POST", `${path}/rotate_secret`],
  ] as const)
    expectError(
      await call(t.app, method, url, method === "PUT" ? { body: { url: "https://x.example.mx/" } } : {}),
      2001,
      401,
    );
});
