// Proves login, token expiry/forgery/revocation, disabled keys, login rate limits (shared by the
// processes on one database), and that every protected route refuses a missing or bad token.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { sql } from "kysely";
import { migrate } from "../src/db/migrate.ts";
import { limits } from "../src/limits.ts";
import { recordFailedLogin } from "../src/modules/auth/repository.ts";
import { signToken } from "../src/modules/auth/tokens.ts";
import { call, createTenant, expectError, expectOk, login, type Tenant } from "./helpers/api.ts";
import { startSecondApp, startTestApp, type TestApp } from "./helpers/harness.ts";

let t: TestApp;
let tenant: Tenant;
before(async () => {
  t = await startTestApp();
  tenant = await createTenant(t, { available: 1234.5 });
});
after(() => t.close());

function loginBody(apiKey: string, password: string) {
  return { api_client: { api_key: apiKey, password } };
}

/** How many of the responses gave each answer ("401 2005": 10). */
function tally(responses: { status: number; body: { code: number } }[]): Record<string, number> {
  const seen: Record<string, number> = {};
  for (const response of responses) {
    const answer = `${response.status} ${response.body.code}`;
    seen[answer] = (seen[answer] ?? 0) + 1;
  }
  return seen;
}

test("login returns the token in the Authorization header and in data", async () => {
  const response = await call<{
    token: string;
    token_type: string;
    expires_in: number;
    client: Record<string, unknown>;
  }>(t.app, "POST", "/v1/auth/login", { body: loginBody(tenant.apiKey, tenant.password) });
  const data = expectOk(response);
  assert.equal(response.headers.authorization, `Bearer ${data.token}`);
  assert.equal(data.token_type, "Bearer");
  assert.equal(data.expires_in, 3600);
  assert.equal(data.client.token, data.token);
  assert.equal(data.client.id, tenant.clientId);
  assert.equal(data.client.available, 1234.5);
  assert.equal(data.client.status, "ACTIVE");
  assert.ok(!JSON.stringify(response.body).includes(tenant.password));
  // Regression (HTTP audit): no cache may keep a token response (RFC 6749 5.1).
  assert.equal(response.headers["cache-control"], "no-store");
  // The token works.
  expectOk(await call(t.app, "GET", "/v1/catalogs/state", { token: data.token }));
});

test("unknown key and wrong password give the same answer", async () => {
  const wrong = await call(t.app, "POST", "/v1/auth/login", {
    body: loginBody(tenant.apiKey, "not-the-password"),
  });
  const unknown = await call(t.app, "POST", "/v1/auth/login", {
    body: loginBody("ek_doesnotexist", tenant.password),
  });
  expectError(wrong, 2005, 401);
  expectError(unknown, 2005, 401);
  assert.deepEqual(wrong.body, unknown.body);
});

test("a missing, malformed, forged or expired token is 401 with its own code", async () => {
  const missing = expectError(await call(t.app, "GET", "/v1/catalogs/state"), 2001, 401);
  // Regression (HTTP audit): a 401 must name the scheme that would succeed (RFC 9110 11.6.1).
  assert.equal(missing.headers["www-authenticate"], 'Bearer realm="emisor"');
  const malformed = { authorization: "Token abc" };
  expectError(await call(t.app, "GET", "/v1/catalogs/state", { headers: malformed }), 2002, 401);
  // The genuine token first: a process remembers the tokens it verified, and the same claims
  // with another signature must not ride on that.
  expectOk(await call(t.app, "GET", "/v1/catalogs/state", { token: tenant.token }));
  const [payload = ""] = tenant.token.split(".");
  const forged = `${payload}.${"A".repeat(43)}`;
  expectError(await call(t.app, "GET", "/v1/catalogs/state", { token: forged }), 2002, 401);
  // The signature's last character carries two spare bits; the three other spellings of the same
  // bytes are not the token (regression: decoding first accepted all four).
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const last = alphabet.indexOf(tenant.token.at(-1) ?? "");
  for (const spare of [1, 2, 3]) {
    const respelled = `${tenant.token.slice(0, -1)}${alphabet[last ^ spare]}`;
    expectError(await call(t.app, "GET", "/v1/catalogs/state", { token: respelled }), 2002, 401);
  }
  const otherKey = Buffer.alloc(32, 7);
  const now = Math.floor(Date.now() / 1000);
  const foreign = signToken(otherKey, {
    kid: tenant.apiKeyId,
    cid: tenant.clientId,
    iat: now,
    exp: now + 60,
  });
  expectError(await call(t.app, "GET", "/v1/catalogs/state", { token: foreign.token }), 2002, 401);
  const expired = signToken(t.ctx.keys.token, {
    kid: tenant.apiKeyId,
    cid: tenant.clientId,
    iat: now - 7200,
    exp: now - 1,
  });
  expectError(await call(t.app, "GET", "/v1/catalogs/state", { token: expired.token }), 2003, 401);
});

test("a token expires after EMISOR_TOKEN_TTL_SECONDS", async () => {
  const short = await startTestApp({ tokenTtlSeconds: 2 });
  try {
    const owner = await createTenant(short);
    expectOk(await call(short.app, "GET", "/v1/catalogs/gender", { token: owner.token }));
    await new Promise((resolve) => setTimeout(resolve, 3100));
    expectError(await call(short.app, "GET", "/v1/catalogs/gender", { token: owner.token }), 2003, 401);
  } finally {
    await short.close();
  }
});

test("logout revokes the token; a new login works", async () => {
  const token = await login(t.app, tenant.apiKey, tenant.password);
  expectOk(await call(t.app, "POST", "/v1/auth/logout", { token }));
  expectError(await call(t.app, "GET", "/v1/catalogs/state", { token }), 2004, 401);
  expectOk(await call(t.app, "GET", "/v1/catalogs/state", { token: tenant.token }));
});

test("with key states cached, as in production, a known key answers at once and the same refusals hold", async () => {
  const cached = await startTestApp({ authCacheSeconds: 600 });
  try {
    const owner = await createTenant(cached);
    // The first request reads the key's state; the next ones use what this process knows.
    for (let i = 0; i < 3; i++)
      expectOk(await call(cached.app, "GET", "/v1/catalogs/state", { token: owner.token }));
    expectError(await call(cached.app, "GET", "/v1/catalogs/state"), 2001, 401);
    const [payload = ""] = owner.token.split(".");
    expectError(
      await call(cached.app, "GET", "/v1/catalogs/state", { token: `${payload}.${"A".repeat(43)}` }),
      2002,
      401,
    );
    const now = Math.floor(Date.now() / 1000);
    const otherClient = signToken(cached.ctx.keys.token, {
      kid: owner.apiKeyId,
      cid: "00000000-0000-4000-8000-000000000000",
      iat: now,
      exp: now + 60,
    });
    expectError(await call(cached.app, "GET", "/v1/catalogs/state", { token: otherClient.token }), 2002, 401);
    const token = await login(cached.app, owner.apiKey, owner.password);
    expectOk(await call(cached.app, "GET", "/v1/catalogs/state", { token }));
    expectOk(await call(cached.app, "POST", "/v1/auth/logout", { token }));
    expectError(await call(cached.app, "GET", "/v1/catalogs/state", { token }), 2004, 401);
    expectOk(await call(cached.app, "GET", "/v1/catalogs/state", { token: owner.token }));
  } finally {
    await cached.close();
  }
});

test("a disabled API key stops working and cannot log in", async () => {
  const victim = await createTenant(t);
  await t.ctx.db
    .updateTable("api_keys")
    .set({ status: "DISABLED" })
    .where("id", "=", victim.apiKeyId)
    .execute();
  expectError(await call(t.app, "GET", "/v1/catalogs/state", { token: victim.token }), 2006, 401);
  expectError(
    await call(t.app, "POST", "/v1/auth/login", { body: loginBody(victim.apiKey, victim.password) }),
    2006,
    401,
  );
});

test("failed logins from one address are rate limited with Retry-After", async () => {
  // A separate app trusting X-Forwarded-For, so that this address's failures are its own.
  const other = await startTestApp({ trustProxy: "loopback,linklocal,uniquelocal" });
  const headers = { "x-forwarded-for": "10.9.9.9" };
  try {
    let last = await call(other.app, "POST", "/v1/auth/login", {
      body: loginBody("ek_nobody", "x"),
      headers,
    });
    // Each attempt names another key (a spray), so no key's own lock answers first.
    for (let i = 0; i < limits.loginFailuresPerIpMax; i++) {
      last = await call(other.app, "POST", "/v1/auth/login", {
        body: loginBody(`ek_nobody${i}`, "x"),
        headers,
      });
    }
    expectError(last, 2007, 429);
    assert.ok(Number(last.headers["retry-after"]) > 0);
    // Another address is not affected.
    const elsewhere = await call(other.app, "POST", "/v1/auth/login", {
      body: loginBody("ek_nobody", "x"),
      headers: { "x-forwarded-for": "10.9.9.10" },
    });
    expectError(elsewhere, 2005, 401);
    // Regression (third audit): the address is the one the trusted proxy saw (the rightmost
    // entry it did not write), not the leftmost, which the caller writes: a new made-up address
    // per attempt does not escape the limit.
    for (let i = 0; i <= limits.loginFailuresPerIpMax; i++) {
      last = await call(other.app, "POST", "/v1/auth/login", {
        body: loginBody(`ek_spray${i}`, "x"),
        headers: { "x-forwarded-for": `198.51.100.${i}, 203.0.113.7` },
      });
    }
    expectError(last, 2007, 429);
  } finally {
    await other.close();
  }
});

test("an API key is locked after repeated failed logins, even with the right password", async () => {
  const victim = await createTenant(t);
  for (let i = 0; i < limits.loginFailuresPerKeyMax; i++) {
    const response = await call(t.app, "POST", "/v1/auth/login", {
      body: loginBody(victim.apiKey, `wrong-${i}`),
    });
    // Every inject comes from the same address; the per-IP limit is larger than the per-key one.
    expectError(response, 2005, 401);
  }
  const locked = await call(t.app, "POST", "/v1/auth/login", {
    body: loginBody(victim.apiKey, victim.password),
  });
  expectError(locked, 2008, 429);
  assert.ok(Number(locked.headers["retry-after"]) > limits.loginLockSeconds - 60);
});

test("a key id that does not exist locks the same way, so the lockout does not tell which keys exist", async () => {
  // A separate app trusting X-Forwarded-For, so that each attempt comes from its own address.
  const other = await startTestApp({ trustProxy: "loopback,linklocal,uniquelocal" });
  const answers = async (apiKey: string) => {
    const seen: string[] = [];
    for (let i = 0; i <= limits.loginFailuresPerKeyMax; i++) {
      const response = await call(other.app, "POST", "/v1/auth/login", {
        body: loginBody(apiKey, `wrong-${i}`),
        headers: { "x-forwarded-for": `10.8.${i}.1` },
      });
      seen.push(`${response.status} ${response.body.code}`);
      if (i === limits.loginFailuresPerKeyMax) {
        assert.ok(Number(response.headers["retry-after"]) > limits.loginLockSeconds - 60);
      }
    }
    return seen;
  };
  try {
    const real = await createTenant(other);
    const forReal = await answers(real.apiKey);
    const forNobody = await answers(`${real.apiKey.slice(0, -4)}zzzz`);
    assert.deepEqual(forNobody, forReal);
    assert.equal(forReal.at(-1), "429 2008");
    assert.equal(forReal.filter((answer) => answer === "401 2005").length, limits.loginFailuresPerKeyMax);
  } finally {
    await other.close();
  }
});

test("logins sent at once get no more guesses than logins sent one after another", async () => {
  // A separate app trusting X-Forwarded-For, so that each test picks its addresses.
  const other = await startTestApp({ trustProxy: "loopback,linklocal,uniquelocal" });
  try {
    // 30 wrong passwords for one key at once, each from its own address: 10 are checked, the
    // rest find the key locked, and so does the right password afterwards.
    const victim = await createTenant(other);
    const guesses = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        call(other.app, "POST", "/v1/auth/login", {
          body: loginBody(victim.apiKey, `wrong-${i}`),
          headers: { "x-forwarded-for": `10.7.${i}.1` },
        }),
      ),
    );
    assert.deepEqual(tally(guesses), {
      "401 2005": limits.loginFailuresPerKeyMax,
      "429 2008": 30 - limits.loginFailuresPerKeyMax,
    });
    const right = await call(other.app, "POST", "/v1/auth/login", {
      body: loginBody(victim.apiKey, victim.password),
      headers: { "x-forwarded-for": "10.7.99.1" },
    });
    expectError(right, 2008, 429);

    // 30 wrong logins at once from one address, each naming another key: 20 are checked, the
    // rest are refused by the address's limit.
    const sprayed = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        call(other.app, "POST", "/v1/auth/login", {
          body: loginBody(`ek_spray${i}`, "x"),
          headers: { "x-forwarded-for": "10.6.6.6" },
        }),
      ),
    );
    assert.deepEqual(tally(sprayed), {
      "401 2005": limits.loginFailuresPerIpMax,
      "429 2007": 30 - limits.loginFailuresPerIpMax,
    });

    // A right password gives its address's count back: logins at once from one address that
    // succeed never use up its limit.
    const owner = await createTenant(other);
    const good = await Promise.all(
      Array.from({ length: limits.loginFailuresPerIpMax + 5 }, () =>
        call(other.app, "POST", "/v1/auth/login", {
          body: loginBody(owner.apiKey, owner.password),
          headers: { "x-forwarded-for": "10.5.5.5" },
        }),
      ),
    );
    assert.deepEqual(tally(good), { "200 0": limits.loginFailuresPerIpMax + 5 });
  } finally {
    await other.close();
  }
});

test("two processes on one database share the login limits of an address and of a key id", async () => {
  // Regression (fourth audit): each process counted an address's failures, and an unknown key
  // id's, in its own memory. Behind a load balancer an address got 20 failures a minute per
  // process, and an unknown id never locked where a real key (counted in the database) did.
  const first = await startTestApp({ trustProxy: "loopback,linklocal,uniquelocal" });
  const second = await startSecondApp(first);
  const apps = [first.app, second.app];
  const attempt = (i: number, apiKey: string, password: string, address: string) =>
    call(apps[i % 2] ?? first.app, "POST", "/v1/auth/login", {
      body: loginBody(apiKey, password),
      headers: { "x-forwarded-for": address },
    });
  try {
    // One address's failures, alternating between the two: 2007 at the combined limit, in both.
    for (let i = 0; i < limits.loginFailuresPerIpMax; i++)
      expectError(await attempt(i, `ek_split${i}`, "x", "10.4.4.4"), 2005, 401);
    for (const i of [0, 1]) {
      const refused = expectError(await attempt(i, "ek_split", "x", "10.4.4.4"), 2007, 429);
      assert.ok(Number(refused.headers["retry-after"]) > 0);
    }

    // A key's failures, alternating between the two, each from its own address: an unknown key id
    // answers as a real key does and locks at the same count, in both.
    const answers = async (apiKey: string) => {
      const seen: string[] = [];
      for (let i = 0; i <= limits.loginFailuresPerKeyMax + 1; i++) {
        const response = await attempt(i, apiKey, `wrong-${i}`, `10.3.${i}.1`);
        seen.push(`${response.status} ${response.body.code}`);
      }
      return seen;
    };
    const real = await createTenant(first);
    const forReal = await answers(real.apiKey);
    assert.deepEqual(await answers(`${real.apiKey.slice(0, -4)}zzzz`), forReal);
    assert.deepEqual(forReal.slice(limits.loginFailuresPerKeyMax), ["429 2008", "429 2008"]);

    // The same at once: 30 wrong passwords for one key id, half through each (on PostgreSQL two
    // pools counting at the same time), are 10 checked failures and 20 locks, whether the key
    // exists or not; 30 failures at once from one address, 20 failures and 10 refusals.
    const atOnce = (apiKey: string, address: (i: number) => string) =>
      Promise.all(Array.from({ length: 30 }, (_, i) => attempt(i, apiKey, `wrong-${i}`, address(i))));
    const other = await createTenant(first);
    for (const apiKey of [other.apiKey, `${other.apiKey.slice(0, -4)}zzzz`]) {
      assert.deepEqual(tally(await atOnce(apiKey, (i) => `10.2.${i}.1`)), {
        "401 2005": limits.loginFailuresPerKeyMax,
        "429 2008": 30 - limits.loginFailuresPerKeyMax,
      });
    }
    const sprayed = await Promise.all(
      Array.from({ length: 30 }, (_, i) => attempt(i, `ek_spray${i}`, "x", "10.1.1.1")),
    );
    assert.deepEqual(tally(sprayed), {
      "401 2005": limits.loginFailuresPerIpMax,
      "429 2007": 30 - limits.loginFailuresPerIpMax,
    });
  } finally {
    await second.close();
    await first.close();
  }
});

test("failures counted by two processes at the same time are none of them lost", async () => {
  // Each count is one upsert that locks its row: a read-then-write would lose counts here on
  // PostgreSQL, where the two processes' pools run their statements at the same time.
  const first = await startTestApp();
  const second = await startSecondApp(first);
  try {
    const rules = {
      addressFailuresMax: 1000,
      addressWindowSeconds: 60,
      keyFailuresMax: 1000,
      keyLockSeconds: 60,
    };
    const attempt = { apiKey: "ek_counted", address: "10.0.0.1" };
    const counts = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        recordFailedLogin((i % 2 ? second : first).ctx.db, attempt, rules),
      ),
    );
    assert.ok(
      counts.every((limited) => limited.addressRetryAfter === null && limited.keyRetryAfter === null),
    );
    const { rows } = await sql<{ kind: string; failures: number }>`
      select kind, failures from login_failures order by kind`.execute(first.ctx.db);
    assert.deepEqual(rows, [
      { kind: "address", failures: 60 },
      { kind: "key", failures: 60 },
    ]);
  } finally {
    await second.close();
    await first.close();
  }
});

test("counts expire: an address's window, a key id's count after the lock's length; expired rows are deleted", async () => {
  const other = await startTestApp({ trustProxy: "loopback,linklocal,uniquelocal" });
  const fail = (apiKey: string, address: string) =>
    call(other.app, "POST", "/v1/auth/login", {
      body: loginBody(apiKey, "not-the-password"),
      headers: { "x-forwarded-for": address },
    });
  /** What the clock would have done: the rows of these subjects reach their end now. */
  const expire = (...subjects: string[]) =>
    sql`update login_failures set expires_at = now() - interval '1 second'
      where subject in (${sql.join(subjects)})`.execute(other.ctx.db);
  try {
    // The address's window ends: its failures start again at one, in a new window.
    for (let i = 0; i < limits.loginFailuresPerIpMax; i++)
      expectError(await fail(`ek_window${i}`, "10.20.0.1"), 2005, 401);
    expectError(await fail("ek_window", "10.20.0.1"), 2007, 429);
    await expire("10.20.0.1");
    expectError(await fail("ek_window", "10.20.0.1"), 2005, 401);

    // A key id's count is forgotten the lock's length after its last failure (a real key's and an
    // unknown id's alike): its next failures count from one.
    const owner = await createTenant(other);
    for (const apiKey of [owner.apiKey, "ek_forgotten"]) {
      for (let i = 0; i < limits.loginFailuresPerKeyMax - 1; i++)
        expectError(await fail(apiKey, `10.21.${i}.1`), 2005, 401);
      await expire(apiKey);
      for (let i = 0; i < limits.loginFailuresPerKeyMax - 1; i++)
        expectError(await fail(apiKey, `10.22.${i}.1`), 2005, 401);
      expectError(await fail(apiKey, "10.23.0.1"), 2005, 401);
      expectError(await fail(apiKey, "10.23.0.2"), 2008, 429);
      // The lock ends: logins are checked again.
      await expire(apiKey);
      expectError(await fail(apiKey, "10.23.0.3"), 2005, 401);
    }
    expectOk(
      await call(other.app, "POST", "/v1/auth/login", {
        body: loginBody(owner.apiKey, owner.password),
        headers: { "x-forwarded-for": "10.23.0.4" },
      }),
    );

    // Expired rows mean nothing; the next failure deletes them (the table does not grow with every
    // address and key id ever seen). Only the key ids and addresses are stored, never a password.
    await sql`update login_failures set expires_at = now() - interval '1 second'`.execute(other.ctx.db);
    expectError(await fail("ek_last", "10.24.0.1"), 2005, 401);
    const { rows } = await sql<{ kind: string; subject: string; failures: number }>`
      select kind, subject, failures from login_failures order by kind`.execute(other.ctx.db);
    assert.deepEqual(rows, [
      { kind: "address", subject: "10.24.0.1", failures: 1 },
      { kind: "key", subject: "ek_last", failures: 1 },
    ]);
  } finally {
    await other.close();
  }
});

test("migration 0014 carries a key's lock and count from api_keys to login_failures", async () => {
  const other = await startTestApp();
  try {
    const locked = await createTenant(other);
    const counting = await createTenant(other);
    // The state before 0014: the lock and the count in api_keys.
    await sql`drop table login_failures`.execute(other.ctx.db);
    await sql`delete from schema_migrations where version = '0014_login_failures'`.execute(other.ctx.db);
    await sql`update api_keys set locked_until = now() + interval '20 minutes'
      where id = ${locked.apiKeyId}`.execute(other.ctx.db);
    await sql`update api_keys set failed_logins = ${limits.loginFailuresPerKeyMax - 1}
      where id = ${counting.apiKeyId}`.execute(other.ctx.db);
    assert.deepEqual(await migrate(other.database), ["0014_login_failures"]);

    const answer = async (owner: Tenant, password: string) => {
      const response = await call(other.app, "POST", "/v1/auth/login", {
        body: loginBody(owner.apiKey, password),
      });
      return `${response.status} ${response.body.code}`;
    };
    assert.equal(await answer(locked, locked.password), "429 2008");
    assert.equal(await answer(counting, "wrong"), "401 2005");
    assert.equal(await answer(counting, counting.password), "429 2008");
  } finally {
    await other.close();
  }
});

test("every protected route refuses a missing or invalid token (from the OpenAPI document)", async () => {
  const spec = (await t.app.inject({ url: "/openapi.json" })).json() as {
    paths: Record<string, Record<string, { security?: unknown[] }>>;
  };
  let checked = 0;
  for (const [path, methods] of Object.entries(spec.paths)) {
    for (const method of Object.keys(methods)) {
      // Login has no token yet; rail callbacks are signed instead (test/spei-incoming.test.ts).
      if (path === "/v1/auth/login" || path.startsWith("/v1/rails/")) continue;
      assert.ok(path.startsWith("/v1/"), `${path} is documented outside /v1`);
      const url = path.replace(/\{[^}]+\}/g, randomUUID());
      const upper = method.toUpperCase() as "GET";
      const body = upper === "GET" || upper === "DELETE" ? undefined : {};
      expectError(await call(t.app, upper, url, { body }), 2001, 401);
      expectError(await call(t.app, upper, url, { body, token: "not-a-token" }), 2002, 401);
      checked += 1;
    }
  }
  assert.ok(checked >= 10, `only ${checked} protected routes found`);
});
