// Proves the README stays true: every catalog code and every configuration variable is documented,
// and the error table lists no code the service does not have; the cardholder lookup example has
// the shape and values the server answers.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { configVariables } from "../src/config.ts";
import { errors } from "../src/errors.ts";
import { call, createTenant, expectOk, login, type Tenant } from "./helpers/api.ts";
import { cardsFor } from "./helpers/cards.ts";
import { startTestApp } from "./helpers/harness.ts";

const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");

test("every catalog code is in the README's error table with its HTTP status and name, and nothing else is", () => {
  const documented = new Map<number, { status: number; name: string }>();
  for (const match of readme.matchAll(/^\| (\d{4}) \| (\d{3}) \| `(\w+)` \|/gm)) {
    documented.set(Number(match[1]), { status: Number(match[2]), name: match[3] ?? "" });
  }
  for (const [name, def] of Object.entries(errors)) {
    const row = documented.get(def.code);
    assert.ok(row, `error ${def.code} (${name}) is missing from the README's error table`);
    assert.equal(row.status, def.status, `README gives ${def.code} the wrong HTTP status`);
    assert.equal(row.name, name, `README names ${def.code} differently`);
  }
  const codes = new Set(Object.values(errors).map((d) => d.code));
  for (const code of documented.keys())
    assert.ok(codes.has(code), `README documents ${code}, which does not exist`);
});

test("catalog codes are unique and their class matches their HTTP status", () => {
  const codes = Object.values(errors).map((d) => d.code);
  assert.equal(new Set(codes).size, codes.length);
  const classOf: Record<string, number[]> = {
    "1": [400, 408, 413, 415, 431],
    "2": [401, 403, 429],
    "3": [404],
    "4": [409],
    "5": [422],
    "6": [502, 503, 504],
    "9": [500],
  };
  for (const [name, def] of Object.entries(errors)) {
    assert.ok(
      classOf[String(def.code)[0] ?? ""]?.includes(def.status),
      `${name} ${def.code} has status ${def.status}`,
    );
  }
});

test("every environment variable is in the README's configuration table", () => {
  for (const name of configVariables) {
    assert.match(readme, new RegExp(`^\\| \`${name}\` \\|`, "m"), `${name} is missing from the README`);
  }
  const source = readFileSync(new URL("../src/config.ts", import.meta.url), "utf8");
  for (const match of source.matchAll(/env(?:\.|,\s*")([A-Z_]{4,})/g)) {
    assert.ok(
      (configVariables as readonly string[]).includes(match[1] ?? ""),
      `${match[1]} is read but not listed`,
    );
  }
});

/** The JSON of the first ```json block after `marker` in the README. */
function exampleAfter(marker: string): Record<string, unknown> {
  const at = readme.indexOf(marker);
  assert.ok(at >= 0, `${marker} is not in the README`);
  const start = readme.indexOf("```json\n", at) + "```json\n".length;
  return JSON.parse(readme.slice(start, readme.indexOf("```", start)));
}

test("the cardholder lookup example answers what the server answers for the README's sub-client NORTE", async () => {
  // Regression (audit): the example's card showed the client's name as assigned_by.name (the
  // server answers the API key's name and description) and a 7-digit account_number.
  const t = await startTestApp();
  try {
    const root = await createTenant(t, { available: 10_000 });
    const marker = "-H 'Idempotency-Key: norte-001' -d '";
    const from = readme.indexOf(marker) + marker.length;
    const subclientBody = JSON.parse(readme.slice(from, readme.indexOf("'\n", from)));
    const created = expectOk(
      await call<{ subclient: { id: string; api_client: { id: string; api_key: string } } }>(
        t.app,
        "POST",
        "/v1/clients",
        { token: root.token, body: subclientBody },
      ),
    );
    const norte: Tenant = {
      ...root,
      clientId: created.subclient.id,
      apiKeyId: created.subclient.api_client.id,
      token: await login(t.app, created.subclient.api_client.api_key, subclientBody.api_key_password),
    };
    const [card] = await cardsFor(t, norte, 1);
    assert.ok(card);
    const found = expectOk(
      await call<{ cardholder: { accounts: Array<Record<string, unknown> & { cards: unknown[] }> } }>(
        t.app,
        "GET",
        `/v1/cardholders?id=${card.cardholderId}`,
        { token: norte.token },
      ),
    );
    const example = exampleAfter('curl -s "$B/v1/cardholders?curp=') as {
      data: {
        cardholder: { accounts: Array<Record<string, unknown> & { cards: Array<Record<string, unknown>> }> };
      };
    };
    const [exampleAccount] = example.data.cardholder.accounts;
    const [account] = found.cardholder.accounts;
    assert.ok(exampleAccount && account);
    assert.deepEqual(Object.keys(exampleAccount).sort(), Object.keys(account).sort());
    assert.equal(typeof exampleAccount.account_number, typeof account.account_number);
    assert.equal(String(exampleAccount.account_number).length, String(account.account_number).length);
    assert.equal(account.assigned_by, norte.apiKeyId);
    const [exampleCard] = exampleAccount.cards;
    const [actualCard] = account.cards as Array<Record<string, unknown>>;
    assert.ok(exampleCard && actualCard);
    assert.deepEqual(Object.keys(exampleCard).sort(), Object.keys(actualCard).sort());
    assert.deepEqual({ ...(exampleCard.assigned_by as object), id: norte.apiKeyId }, actualCard.assigned_by);
  } finally {
    await t.close();
  }
});
