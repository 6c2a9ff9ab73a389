// Proves that the per-API-key rate limit is one limit however many processes serve the key.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { leaseSize } from "../src/http/rate-limit.ts";
import { call, createTenant, login, type Tenant } from "./helpers/api.ts";
import { startSecondApp, startTestApp, type TestApp } from "./helpers/harness.ts";

const perSecond = 20;
let first: TestApp;
let second: TestApp;
let tenant: Tenant;
before(async () => {
  first = await startTestApp({ rateLimitPerSecond: perSecond });
  second = await startSecondApp(first);
  tenant = await createTenant(first);
});
after(async () => {
  await second.close();
  await first.close();
});

/**
 * A money-moving request the limit counts: its body is refused (1000) after the limit took its
 * token, so it moves nothing; a limited one is 429 (2009).
 */
async function spend(t: TestApp, token: string): Promise<number> {
  const answer = await call(t.app, "POST", "/v1/cards/payment", { token, body: {} });
  assert.ok(answer.status === 400 || answer.status === 429, `answered ${answer.status}`);
  if (answer.status === 429) {
    assert.equal(answer.body.code, 2009);
    assert.match(String(answer.headers["retry-after"]), /^[1-9][0-9]*$/);
  }
  return answer.status;
}

test("two processes on one database share one API key's limit", async () => {
  const started = Date.now();
  const statuses = await Promise.all(
    Array.from({ length: 3 * perSecond }, (_, i) => spend(i % 2 === 0 ? first : second, tenant.token)),
  );
  const elapsedSeconds = (Date.now() - started) / 1000;
  const admitted = statuses.filter((status) => status === 400).length;
  // The bucket gives its burst and what refilled meanwhile, never more; a process alone would
  // have given each its own burst (2 x perSecond). Leases dropped unspent may give less, by at
  // most one lease per process.
  const most = perSecond + Math.ceil(elapsedSeconds * perSecond);
  assert.ok(
    admitted <= most,
    `admitted ${admitted} of ${statuses.length} in ${elapsedSeconds} s (at most ${most})`,
  );
  assert.ok(admitted >= perSecond - 2 * leaseSize(perSecond), `admitted only ${admitted}`);
  assert.ok(statuses.includes(429));
});

test("the bucket refills for every process, and each API key has its own", async () => {
  const other = await createTenant(first);
  // The other key is untouched by the first test's spending.
  assert.equal(await spend(second, other.token), 400);
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  const token = await login(second.app, tenant.apiKey, tenant.password);
  assert.equal(await spend(second, token), 400);
  assert.equal(await spend(first, token), 400);
});
