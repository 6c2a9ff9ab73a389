// Proves what free text may hold: a card number, with or without separators, is refused with 1010 in
// every kind of field that takes free text, and the refusal writes nothing and never echoes it;
// other numbers (not Luhn-valid, a CLABE, identifiers in their own fields) are accepted; text for the
// SPEI rail refuses control and invisible characters; text the rail sends is masked, never refused.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { buildClabe, isValidClabe } from "../src/domain/clabe.ts";
import { isLuhnValid } from "../src/domain/luhn.ts";
import { balanceOf } from "../src/ledger/ledger.ts";
import { call, createSubClient, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { type AssignedCard, createProduct, spendableCard } from "./helpers/cards.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { cardholderBody, subclientBody } from "./helpers/people.ts";
import { abono, eventsOf, postSigned } from "./helpers/rails.ts";
import { changesBetween, snapshot, tablesOf } from "./helpers/routes.ts";

const secret = "rail-secret-free-text";
let t: TestApp;
let tenant: Tenant;
let card: AssignedCard;
before(async () => {
  t = await startTestApp({ speiWebhookSecret: secret });
  tenant = await createTenant(t, { available: 5000 });
  card = await spendableCard(t, tenant, { commission: 0, funds: 1000 });
});
after(() => t.close());

const pan = "5311010569114749";
/** The same card number as people write it. */
const panForms = [
  pan,
  `Tarjeta ${pan} 12/27`,
  "5311 0105 6911 4749",
  "5311-0105-6911-4749",
  "pago 2 5311.0105.6911.4749",
];
const where = { latitude: 19.4326, longitude: -99.1332 };

/** A transfer out paid by the test's card, valid but for `patch`. */
function transferBody(patch: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    card_number: card.id,
    payment_concept: "Renta",
    beneficiary_account: buildClabe("012", "180", 1234567n),
    beneficiary_institution: "40012",
    beneficiary_name: "Maria Lopez",
    numeric_reference: "1234567",
    beneficiary_rfc_curp: "ND",
    beneficiary_email: "maria@example.mx",
    amount: 1,
    pin: "4821",
    ...patch,
  };
}

/** One free-text field of one route: method, URL, field, and a valid body around a text. */
type FreeTextField = ["POST" | "PUT", string, string, (text: string) => Record<string, unknown>];

function freeTextFields(sub: Tenant): FreeTextField[] {
  const product = { name: "Debito", card_type: "VIRTUAL", bin: "53112233", affinity_group: "NOMINA" };
  const topup = { product_id: "TELCEL_100", phone_number: "5512345678", email: "cliente@example.com" };
  const between = { from_client_id: tenant.clientId, to_client_id: sub.clientId, amount: 1 };
  const cardAt = { card_number: card.id, ...where };
  return [
    [
      "POST",
      "/v1/cards/payment",
      "payment_description",
      (text) => ({ ...cardAt, amount: 1, payment_description: text }),
    ],
    [
      "POST",
      "/v1/cards/unload",
      "description",
      (text) => ({ card_number: card.id, amount: 1, description: text }),
    ],
    [
      "POST",
      "/v1/transfer/cards",
      "payment_concept",
      (text) => transferBody({ payment_concept: text.slice(0, 40) }),
    ],
    [
      "POST",
      "/v1/transfer/cards",
      "beneficiary_name",
      (text) => transferBody({ beneficiary_name: text.slice(0, 40) }),
    ],
    ["POST", "/v1/clients/transfers", "description", (text) => ({ ...between, description: text })],
    ["POST", "/v1/cardholders", "observations", (text) => cardholderBody({ observations: text })],
    ["POST", "/v1/clients", "name", (text) => subclientBody({ name: text.slice(0, 30) })],
    ["POST", "/v1/products", "description", (text) => ({ ...product, description: text })],
    [
      "POST",
      "/v1/webhooks",
      "description",
      (text) => ({ url: "https://hooks.example.com/x", description: text }),
    ],
    [
      "PUT",
      "/v1/cards/status",
      "reason",
      (text) => ({ ...cardAt, status: "TEMPORARY_INACTIVE", reason: text }),
    ],
    ["POST", "/v1/airtime/topup", "additional_data", (text) => ({ ...topup, additional_data: text })],
  ];
}

test("a card number in free text is refused with 1010, with or without separators, and nothing is written", async () => {
  const sub = await createSubClient(t, tenant);
  const tables = await tablesOf(t);
  const before = await snapshot(t, tables);
  for (const [method, url, field, body] of freeTextFields(sub)) {
    for (const text of panForms) {
      const refused = expectError(
        await call(t.app, method, url, { token: tenant.token, body: body(text) }),
        1010,
        400,
      );
      const label = `${url} ${field} ${JSON.stringify(text)}`;
      assert.equal(refused.body.message, `${field}: must not contain a card number`, label);
      assert.deepEqual(
        refused.body.data,
        { details: [{ field, rule: "card_number", message: "must not contain a card number" }], total: 1 },
        label,
      );
    }
  }
  assert.deepEqual(changesBetween(before, await snapshot(t, tables)), []);
  // With other mistakes the code is still 1010; the details list them all.
  const mixed = expectError(
    await call(t.app, "POST", "/v1/cards/payment", {
      token: tenant.token,
      body: { card_number: card.id, amount: -1, payment_description: pan, ...where },
    }),
    1010,
    400,
  );
  assert.equal(mixed.body.message, "payment_description: must not contain a card number (and 1 more)");
  assert.deepEqual(
    (mixed.body.data as { details: Array<{ field: string }> }).details.map((d) => d.field).sort(),
    ["amount", "payment_description"],
  );
});

/** A CLABE whose 18 digits also pass Luhn: in free text it is taken for the CLABE it is. */
function luhnValidClabe(): string {
  for (let account = 1n; ; account++) {
    const clabe = buildClabe("012", "180", account);
    if (isLuhnValid(clabe)) return clabe;
  }
}

test("other numbers in free text are accepted and kept as written; identifiers keep their own fields", async () => {
  const paid = expectOk(
    await call<{ operation: { payment_description: string } }>(t.app, "POST", "/v1/cards/payment", {
      token: tenant.token,
      body: { card_number: card.id, amount: 1, payment_description: "5311010569114748", ...where },
    }),
  );
  assert.equal(paid.operation.payment_description, "5311010569114748"); // not Luhn-valid
  const clabe = luhnValidClabe();
  assert.ok(isValidClabe(clabe));
  const texts = [
    `Abono a CLABE ${clabe}`,
    "0000 0000 0000 0000", // no card number starts with 0
    "Factura 2025-01-15 ref 1234567 tel 55 1234 5678",
    "pedido a1700000-0000-4000-8000-000000000100",
    `Tarjeta terminación ${pan.slice(-4)}`,
    "53110105691147491", // 17 digits, not Luhn-valid
    "12345678901234567890123", // longer than any card number
  ];
  for (const text of texts) {
    const product = await createProduct(t, tenant, { description: text });
    assert.equal(product.description, text);
  }
  // A transfer out to a CLABE, and to a card number in beneficiary_account, its own field.
  for (const account of [buildClabe("012", "180", 1234567n), "4111111111111111"]) {
    expectOk(
      await call(t.app, "POST", "/v1/transfer/cards", {
        token: tenant.token,
        body: transferBody({
          payment_concept: `Renta ref ${clabe}`.slice(0, 40),
          beneficiary_account: account,
          beneficiary_name: "José Peña Núñez",
        }),
      }),
    );
  }
  // The client's own reference is an identifier, not free text.
  expectOk(
    await call(t.app, "POST", "/v1/cardholders", {
      token: tenant.token,
      body: cardholderBody({ external_id: pan }),
    }),
  );
});

test("text for the SPEI rail refuses control and invisible characters; nothing moves", async () => {
  const balance = await balanceOf(t.ctx.db, card.id);
  const invisible = [
    "MARIA\u202ELOPEZ",
    "MARIA\u200BLOPEZ",
    "\u2066MARIA\u2069",
    "\uFEFFMARIA",
    "MARIA\tLOPEZ",
    "A\u0007",
  ];
  for (const field of ["beneficiary_name", "payment_concept"]) {
    for (const text of invisible) {
      const refused = expectError(
        await call(t.app, "POST", "/v1/transfer/cards", {
          token: tenant.token,
          body: transferBody({ [field]: text }),
        }),
        1000,
        400,
      );
      assert.equal(
        refused.body.message,
        `${field}: must not contain control or invisible characters`,
        JSON.stringify(text),
      );
    }
  }
  assert.equal(await balanceOf(t.ctx.db, card.id), balance);
});

test("a card number the rail sends is masked to its last four where stored, never refused", async () => {
  const masked = "****-****-****-4749";
  const answer = expectOk(
    await postSigned(
      t,
      "/v1/rails/spei/incoming",
      abono(tenant.clabe, {
        ConceptoPago: "Pago 5311-0105-6911-4749",
        NombreOrdenante: `JUAN ${pan}`,
      }),
    ),
  ) as { mensaje: string; transfer_operation: { concepto_pago: string; nombre_ordenante: string } };
  assert.equal(answer.mensaje, "confirmar");
  assert.equal(answer.transfer_operation.concepto_pago, `Pago ${masked}`);
  assert.equal(answer.transfer_operation.nombre_ordenante, "JUAN ************4749");
  // The sandbox's abono is the rail's: masked too.
  const sandbox = expectOk(
    await call<{ transfer_operation: { concepto_pago: string } }>(
      t.app,
      "POST",
      "/v1/sandbox/spei/incoming",
      {
        token: tenant.token,
        body: { clabe: tenant.clabe, amount: 1, payment_concept: `Pago ${pan}` },
      },
    ),
  );
  assert.equal(sandbox.transfer_operation.concepto_pago, "Pago ************4749");
  // A state change's detail too.
  const sent = expectOk(
    await call<{ transfer: { id: string; tracking_key: string; operation_date: string } }>(
      t.app,
      "POST",
      "/v1/transfer/cards",
      { token: tenant.token, body: transferBody() },
    ),
  ).transfer;
  const returned = expectOk(
    await postSigned(t, "/v1/rails/spei/order-state", {
      ClaveRastreo: sent.tracking_key,
      FechaOperacion: sent.operation_date,
      Estado: "DEVOLUCION",
      CausaDevolucion: "03",
      Detalle: `Cuenta ${pan} cancelada`,
    }),
  ) as { transfer: { status_detail: string } };
  assert.equal(returned.transfer.status_detail, "Cuenta ************4749 cancelada");
  const stored = JSON.stringify([
    await eventsOf(t, tenant.clientId, "transfer.in.received"),
    await eventsOf(t, tenant.clientId, "transfer.out.returned"),
    await t.ctx.db
      .selectFrom("transfer_operations")
      .select(["concepto_pago", "nombre_ordenante", "nombre_beneficiario"])
      .execute(),
    await t.ctx.db.selectFrom("spei_orders").select("state_detail").execute(),
  ]);
  assert.ok(!stored.replace(/[ .-]/g, "").includes(pan), "a card number is stored readable");
});
