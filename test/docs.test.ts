// Proves the documents stay true: every catalog code is in docs/reference/errors.md and every
// configuration variable in docs/operations.md, the error table lists no code the service does not
// have, and the cardholder lookup example of the cards guide has the shape and values the server
// answers for the sub-client NORTE of the sub-clients guide.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { configVariables } from "../src/config.ts";
import { errors } from "../src/errors.ts";
import { call, createTenant, expectOk, login, type Tenant } from "./helpers/api.ts";
import { cardsFor } from "./helpers/cards.ts";
import { startTestApp } from "./helpers/harness.ts";

const read = (file: string) => readFileSync(new URL(`../${file}`, import.meta.url), "utf8");
const errorCatalog = read("docs/reference/errors.md");
const operations = read("docs/operations.md");
const subClientsGuide = read("docs/guides/sub-clients-and-balances.md");
const cardsGuide = read("docs/guides/cards-and-payments.md");

test("every catalog code is in the error catalog's table with its HTTP status and name, and nothing else is", () => {
  const documented = new Map<number, { status: number; name: string }>();
  for (const match of errorCatalog.matchAll(/^\| (\d{4}) \| (\d{3}) \| `(\w+)` \|/gm)) {
    documented.set(Number(match[1]), { status: Number(match[2]), name: match[3] ?? "" });
  }
  for (const [name, def] of Object.entries(errors)) {
    const row = documented.get(def.code);
    assert.ok(row, `error ${def.code} (${name}) is missing from docs/reference/errors.md`);
    assert.equal(row.status, def.status, `docs/reference/errors.md gives ${def.code} the wrong HTTP status`);
    assert.equal(row.name, name, `docs/reference/errors.md names ${def.code} differently`);
  }
  const codes = new Set(Object.values(errors).map((d) => d.code));
  for (const code of documented.keys())
    assert.ok(codes.has(code), `docs/reference/errors.md documents ${code}, which does not exist`);
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

test("every environment variable is in the configuration table of docs/operations.md", () => {
  for (const name of configVariables) {
    assert.match(
      operations,
      new RegExp(`^\\| \`${name}\` \\|`, "m"),
      `${name} is missing from docs/operations.md`,
    );
  }
  const source = readFileSync(new URL("../src/config.ts", import.meta.url), "utf8");
  for (const match of source.matchAll(/env(?:\.|,\s*")([A-Z_]{4,})/g)) {
    assert.ok(
      (configVariables as readonly string[]).includes(match[1] ?? ""),
      `${match[1]} is read but not listed`,
    );
  }
});

/** The JSON of the first ```json block after `marker` in `document`. */
function exampleAfter(document: string, marker: string): Record<string, unknown> {
  const at = document.indexOf(marker);
  assert.ok(at >= 0, `${marker} is not in the guide`);
  const start = document.indexOf("```json\n", at) + "```json\n".length;
  return JSON.parse(document.slice(start, document.indexOf("```", start)));
}

test("the cardholder lookup example answers what the server answers for the guide's sub-client NORTE", async () => {
  // The example's card names the API key that assigned it (its name and description), not the
  // client, and its account_number has the length the server gives.
  const t = await startTestApp();
  try {
    const root = await createTenant(t, { available: 10_000 });
    const marker = "-H 'Idempotency-Key: norte-001' -d '";
    const from = subClientsGuide.indexOf(marker) + marker.length;
    const subclientBody = JSON.parse(subClientsGuide.slice(from, subClientsGuide.indexOf("'", from)));
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
    const example = exampleAfter(cardsGuide, "A card assigned by the key of the sub-client `NORTE`") as {
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
