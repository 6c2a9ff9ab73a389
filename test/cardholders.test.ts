// Proves cardholder registration and lookup (contract 4.2, 4.3): exact shapes, database-enforced
// uniqueness (also when racing), required identity, tenancy, the several-match rule, and no
// personal data in logs.
import assert from "node:assert/strict";
import { after, before, mock, test } from "node:test";
import { call, createTenant, expectError, expectOk, login, type Tenant } from "./helpers/api.ts";
import { ownLogs, startTestApp, type TestApp } from "./helpers/harness.ts";
import { cardholderBody, subclientBody, uniqueDigits, validCurp, validPersonRfc } from "./helpers/people.ts";

let t: TestApp;
let tenant: Tenant;
before(async () => {
  t = await startTestApp();
  tenant = await createTenant(t, { available: 100 });
});
after(() => t.close());

interface Cardholder {
  id: string;
  rfc: string | null;
  curp: string | null;
  email: string;
  client_id: string;
  address: Record<string, unknown>;
  accounts?: unknown[];
  [field: string]: unknown;
}

const register = (token: string, body: Record<string, unknown>, key?: string) =>
  call<{ cardholder: Cardholder }>(t.app, "POST", "/v1/cardholders", {
    token,
    body,
    ...(key ? { headers: { "idempotency-key": key } } : {}),
  });

const lookup = (token: string, query: Record<string, string>) =>
  call<{ cardholder: Cardholder }>(t.app, "GET", `/v1/cardholders?${new URLSearchParams(query)}`, { token });

const detailsOf = (response: { body: { data: unknown } }) =>
  (response.body.data as { details: Array<{ field: string; rule: string; message: string }> }).details;

async function cardholderCount(): Promise<number> {
  const row = await t.ctx.db
    .selectFrom("cardholders")
    .select((eb) => eb.fn.countAll<bigint>().as("n"))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

const cardholderFields = [
  "address",
  "birthdate",
  "client_id",
  "curp",
  "email",
  "external_id",
  "first_name",
  "gender",
  "gross_monthly_income",
  "has_kids",
  "id",
  "marital_status",
  "mobile_phone",
  "net_monthly_income",
  "observations",
  "primary_phone",
  "rfc",
  "second_name",
  "second_surname",
  "surname",
  "third_name",
  "work_area",
];

test("registers a cardholder: exact 2.3 shape, upper-cased rfc and curp, incomes in pesos", async () => {
  const body = cardholderBody({
    third_name: "Maria",
    work_area: "Ventas",
    int_street_number: "4B",
    gross_monthly_income: 25000.5,
    net_monthly_income: 0,
    observations: "",
    external_id: "emp-77",
  });
  const rfc = String(body.rfc);
  const curp = String(body.curp);
  const { cardholder } = expectOk(
    await register(tenant.token, { ...body, rfc: rfc.toLowerCase(), curp: curp.toLowerCase() }),
  );
  assert.deepEqual(Object.keys(cardholder).sort(), cardholderFields);
  assert.deepEqual(cardholder, {
    id: cardholder.id,
    first_name: "Juan",
    second_name: "Carlos",
    third_name: "Maria",
    surname: "Perez",
    second_surname: "Lopez",
    work_area: "Ventas",
    rfc,
    curp,
    email: body.email,
    primary_phone: "5555555555",
    mobile_phone: body.mobile_phone,
    address: {
      street: "Av. Reforma",
      external_street_number: "222",
      internal_street_number: "4B",
      suburb: "Juarez",
      township: "Cuauhtemoc",
      city: "Ciudad de Mexico",
      state: "CDMX",
      postal_code: "06600",
      country: "484",
    },
    birthdate: "1990-02-15",
    gender: "M",
    marital_status: "SOLTERO",
    has_kids: false,
    gross_monthly_income: 25000.5,
    net_monthly_income: 0,
    observations: "",
    external_id: "emp-77",
    client_id: tenant.clientId,
  });
  const stored = await t.ctx.db
    .selectFrom("cardholders")
    .select(["gross_monthly_income_cents", "net_monthly_income_cents"])
    .where("id", "=", cardholder.id)
    .executeTakeFirstOrThrow();
  assert.equal(stored.gross_monthly_income_cents, 2500050n);
  assert.equal(stored.net_monthly_income_cents, 0n);
});

test("optional fields absent are null; cardholder.created carries the same shape", async () => {
  const { cardholder } = expectOk(await register(tenant.token, cardholderBody()));
  for (const field of [
    "third_name",
    "work_area",
    "gross_monthly_income",
    "net_monthly_income",
    "observations",
    "external_id",
  ]) {
    assert.equal(cardholder[field], null, field);
  }
  assert.equal(cardholder.address.internal_street_number, null);
  const events = await t.ctx.db
    .selectFrom("events")
    .select(["client_id", "data"])
    .where("type", "=", "cardholder.created")
    .where(({ ref }) => ref("data", "->>").key("id" as never), "=", cardholder.id)
    .execute();
  assert.equal(events.length, 1);
  assert.equal(events[0]?.client_id, tenant.clientId);
  assert.deepEqual(events[0]?.data, cardholder);
});

test("lookup by each filter, and by several combined with AND; accounts is a list", async () => {
  const body = cardholderBody();
  const { cardholder } = expectOk(await register(tenant.token, body));
  const queries: Array<Record<string, string>> = [
    { id: cardholder.id },
    { rfc: String(body.rfc) },
    { rfc: String(body.rfc).toLowerCase() },
    { curp: String(body.curp) },
    { email: String(body.email).toUpperCase() },
    { mobile_phone: String(body.mobile_phone) },
    { primary_phone: "5555555555", mobile_phone: String(body.mobile_phone) },
    { id: cardholder.id, curp: String(body.curp), email: String(body.email) },
  ];
  for (const query of queries) {
    const found = expectOk(await lookup(tenant.token, query)).cardholder;
    assert.deepEqual(Object.keys(found).sort(), [...cardholderFields, "accounts"].sort());
    const { accounts, ...rest } = found;
    assert.deepEqual(rest, cardholder, JSON.stringify(query));
    assert.deepEqual(accounts, []);
  }
  // AND: one filter that does not match is enough to find nothing.
  expectError(await lookup(tenant.token, { id: cardholder.id, mobile_phone: uniqueDigits(10) }), 3201, 404);
  expectError(await lookup(tenant.token, { rfc: validPersonRfc() }), 3201, 404);
});

test("a lookup needs a known filter with a valid value: 1000", async () => {
  const cases: Array<[string, string, string]> = [
    ["", "querystring", "minProperties"],
    ["name=Juan", "name", "additionalProperties"],
    ["id=not-a-uuid", "id", "format"],
    ["curp=SHORT", "curp", "minLength"],
    ["primary_phone=55", "primary_phone", "pattern"],
    ["email=a@b", "email", "minLength"],
  ];
  for (const [query, field, rule] of cases) {
    const response = expectError(
      await call(t.app, "GET", `/v1/cardholders${query ? `?${query}` : ""}`, { token: tenant.token }),
      1000,
      400,
    );
    assert.ok(
      detailsOf(response).some((d) => d.field === field && d.rule === rule),
      `${query}: ${JSON.stringify(detailsOf(response))}`,
    );
  }
});

test("several matches (a shared primary_phone) are refused with 5201; another filter narrows it", async () => {
  const phone = uniqueDigits(10);
  const first = expectOk(await register(tenant.token, cardholderBody({ primary_phone: phone }))).cardholder;
  expectOk(await lookup(tenant.token, { primary_phone: phone }));
  expectOk(await register(tenant.token, cardholderBody({ primary_phone: phone })));
  expectError(await lookup(tenant.token, { primary_phone: phone }), 5201, 422);
  const narrowed = expectOk(await lookup(tenant.token, { primary_phone: phone, email: first.email }));
  assert.equal(narrowed.cardholder.id, first.id);
});

test("rfc, curp, email (ignoring case) and mobile_phone are unique across all cardholders: 4201-4204", async () => {
  const other = await createTenant(t);
  const body = cardholderBody();
  expectOk(await register(tenant.token, body));
  const before = await cardholderCount();
  const cases: Array<[Record<string, unknown>, number]> = [
    [{ rfc: body.rfc }, 4201],
    [{ curp: String(body.curp).toLowerCase() }, 4202],
    [{ email: String(body.email).toUpperCase() }, 4203],
    [{ mobile_phone: body.mobile_phone }, 4204],
  ];
  for (const [duplicate, code] of cases) {
    // Another tenant too: uniqueness is across cardholders (contract 2.3), not per client.
    for (const caller of [tenant, other]) {
      const response = expectError(await register(caller.token, cardholderBody(duplicate)), code, 409);
      assert.ok(
        !response.body.message.includes(String(Object.values(duplicate)[0])),
        "the value is not echoed",
      );
    }
  }
  assert.equal(await cardholderCount(), before);
});

test("concurrent registrations of one person: exactly one wins, the others are 409", async () => {
  const body = cardholderBody();
  const responses = await Promise.all(
    Array.from({ length: 6 }, (_, i) =>
      register(tenant.token, {
        ...body,
        email: `racer${i}.${uniqueDigits(8)}@example.mx`,
        mobile_phone: uniqueDigits(10),
      }),
    ),
  );
  assert.equal(responses.filter((r) => r.status === 200).length, 1);
  for (const response of responses.filter((r) => r.status !== 200)) expectError(response, 4201, 409);
});

test("Idempotency-Key: a repeat replays, even when the duplicates race", async () => {
  const body = cardholderBody();
  const first = await register(tenant.token, body, "ch-1");
  const again = await register(tenant.token, body, "ch-1");
  assert.deepEqual(again.body, first.body);
  assert.equal(again.headers["idempotent-replayed"], "true");
  expectError(await register(tenant.token, { ...body, first_name: "Pedro" }, "ch-1"), 4001, 409);

  const raced = cardholderBody();
  const responses = await Promise.all(
    Array.from({ length: 6 }, () => register(tenant.token, raced, "ch-race")),
  );
  const ids = new Set(responses.map((r) => expectOk(r).cardholder.id));
  assert.equal(ids.size, 1);
});

test("a missing rfc or curp is refused naming the field (no product allows it blank)", async () => {
  for (const field of ["rfc", "curp"]) {
    const body = cardholderBody();
    delete body[field];
    const response = expectError(await register(tenant.token, body), 1000, 400);
    assert.deepEqual(detailsOf(response), [
      {
        field,
        rule: "required",
        message: `is required: no active product of this client allows a blank ${field}`,
      },
    ]);
    assert.match(response.body.message, new RegExp(`^${field}: is required`));
  }
});

test("a birthdate is judged by Mexico City's calendar: at 21:00 there, UTC's tomorrow is the future", async () => {
  // Regression (domain audit): the UTC date was used, so from 18:00 in Mexico City tomorrow passed.
  // The clock is set to the last 03:00 UTC (21:00 the day before in Mexico City, UTC-6), in the
  // past so every cache keyed on time is recomputed once the clock is back.
  const at = new Date();
  at.setUTCHours(3, 0, 0, 0);
  if (at.getTime() > Date.now()) at.setUTCDate(at.getUTCDate() - 1);
  const utcDate = at.toISOString().slice(0, 10);
  const mexicoDate = new Date(at.getTime() - 86_400_000).toISOString().slice(0, 10);
  mock.timers.enable({ apis: ["Date"], now: at.getTime() });
  try {
    const future = expectError(
      await register(tenant.token, cardholderBody({ birthdate: utcDate })),
      1000,
      400,
    );
    assert.ok(detailsOf(future).some((d) => d.field === "birthdate" && d.rule === "birthdate"));
    expectOk(await register(tenant.token, cardholderBody({ birthdate: mexicoDate })));
  } finally {
    mock.timers.reset();
  }
});

test("invalid values: 1000 naming the field", async () => {
  const nextYear = new Date().getUTCFullYear() + 1;
  const cases: Array<[Record<string, unknown>, string, string]> = [
    [{ rfc: "CNO200101AB1" }, "rfc", "rfc"],
    [{ rfc: "PEPJ901301AB1" }, "rfc", "rfc"],
    [{ curp: `${validCurp().slice(0, 17)}X` }, "curp", "curp"],
    [{ curp: "PEPJ900215HZZABC01" }, "curp", "curp"],
    [{ birthdate: `${nextYear}-01-01` }, "birthdate", "birthdate"],
    [{ birthdate: "1850-01-01" }, "birthdate", "birthdate"],
    [{ birthdate: "2023-02-29" }, "birthdate", "format"],
    [{ birthdate: "15/02/1990" }, "birthdate", "pattern"],
    [{ gender: "Z" }, "gender", "enum"],
    [{ marital_status: "casado" }, "marital_status", "enum"],
    [{ state: "CIUDAD DE MEXICO" }, "state", "enum"],
    [{ first_name: "Maximilianoxx" }, "first_name", "maxLength"],
    // Regression (contract audit): a name of spaces was registered.
    [{ first_name: "   " }, "first_name", "blank"],
    [{ surname: " " }, "surname", "blank"],
    [{ gross_monthly_income: 10.005 }, "gross_monthly_income", "x-decimals"],
    [{ gross_monthly_income: 1e12 }, "gross_monthly_income", "maximum"],
    [{ has_kids: "no" }, "has_kids", "type"],
    [{ mobile_phone: "55123" }, "mobile_phone", "pattern"],
    [{ email: "juan" }, "email", "format"],
    [{ observations: "x".repeat(101) }, "observations", "maxLength"],
    [{ external_id: "x".repeat(41) }, "external_id", "maxLength"],
    [{ country: "484" }, "country", "additionalProperties"],
  ];
  const before = await cardholderCount();
  for (const [override, field, rule] of cases) {
    const response = expectError(await register(tenant.token, cardholderBody(override)), 1000, 400);
    assert.ok(
      detailsOf(response).some((d) => d.field === field && d.rule === rule),
      `${JSON.stringify(override)}: ${JSON.stringify(detailsOf(response))}`,
    );
  }
  const missing = cardholderBody();
  delete missing.second_surname;
  expectError(await register(tenant.token, missing), 1000, 400);
  assert.equal(await cardholderCount(), before);
});

test("tenancy: a sub-client's cardholders are its parent's to see; nobody else's", async () => {
  const parent = await createTenant(t, { available: 10 });
  const stranger = await createTenant(t);
  const { subclient } = expectOk(
    await call<{ subclient: { id: string; api_client: { api_key: string } } }>(t.app, "POST", "/v1/clients", {
      token: parent.token,
      body: subclientBody({ available: 1 }),
    }),
  );
  const child = await login(t.app, subclient.api_client.api_key, "correct horse battery");

  const forChild = expectOk(
    await register(parent.token, cardholderBody({ client_id: subclient.id })),
  ).cardholder;
  assert.equal(forChild.client_id, subclient.id);
  const ownByChild = expectOk(await register(child, cardholderBody())).cardholder;
  assert.equal(ownByChild.client_id, subclient.id);
  const parents = expectOk(await register(parent.token, cardholderBody())).cardholder;

  for (const id of [forChild.id, ownByChild.id]) {
    expectOk(await lookup(parent.token, { id }));
    expectOk(await lookup(child, { id }));
    expectError(await lookup(stranger.token, { id }), 3201, 404);
  }
  // A child does not see its parent's cardholders, nor register for its parent or a stranger.
  expectError(await lookup(child, { id: parents.id }), 3201, 404);
  expectError(await lookup(child, { curp: String(parents.curp) }), 3201, 404);
  expectError(await register(child, cardholderBody({ client_id: parent.clientId })), 3101, 404);
  expectError(await register(parent.token, cardholderBody({ client_id: stranger.clientId })), 3101, 404);
  expectError(await register(parent.token, cardholderBody({ client_id: crypto.randomUUID() })), 3101, 404);

  // Lookups by id that arrive together are read in one statement: each still gets its own
  // caller's answer, found or 3201, in any mix.
  const matrix = [forChild.id, ownByChild.id, parents.id, crypto.randomUUID()].flatMap((id) =>
    [parent.token, child, stranger.token].map((token) => ({ id, token })),
  );
  const visible = (id: string, token: string) =>
    token === parent.token
      ? id !== matrix[9]?.id
      : token === child
        ? id === forChild.id || id === ownByChild.id
        : false;
  const answers = await Promise.all([...matrix, ...matrix].map(({ id, token }) => lookup(token, { id })));
  answers.forEach((answer, i) => {
    const { id, token } = matrix[i % matrix.length] ?? { id: "", token: "" };
    if (visible(id, token)) assert.equal(expectOk(answer).cardholder.id, id);
    else expectError(answer, 3201, 404);
  });
});

test("no rfc, curp, email or phone reaches a log line, from a body or a query string", async () => {
  const body = cardholderBody();
  expectOk(await register(tenant.token, body));
  expectError(
    await register(tenant.token, { ...body, email: `other.${uniqueDigits(8)}@example.mx` }),
    4201,
    409,
  );
  expectOk(await lookup(tenant.token, { curp: String(body.curp) }));
  expectOk(await lookup(tenant.token, { email: String(body.email) }));
  const logs = ownLogs();
  assert.match(logs, /\/v1\/cardholders/, "requests are logged");
  for (const value of [body.rfc, body.curp, body.email, body.mobile_phone]) {
    assert.ok(!logs.includes(String(value)), "a personal value reached the logs");
  }
});

test("POST /v1/cardholders/search takes the same filters in the body and answers like GET", async () => {
  const body = cardholderBody();
  const created = expectOk(await register(tenant.token, body)) as { cardholder: { id: string } };
  const search = (filters: unknown) =>
    call(t.app, "POST", "/v1/cardholders/search", { token: tenant.token, body: filters });
  const viaGet = expectOk(await lookup(tenant.token, { curp: String(body.curp) }));
  const viaPost = expectOk(await search({ curp: body.curp }));
  assert.deepEqual(viaPost, viaGet);
  assert.equal((viaPost as { cardholder: { id: string } }).cardholder.id, created.cardholder.id);
  expectOk(await search({ rfc: body.rfc, email: String(body.email).toUpperCase() }));
  expectError(await search({ rfc: body.rfc, email: "other@example.mx" }), 3201, 404);
  expectError(await search({}), 1000, 400);
  expectError(await search({ curp: "short" }), 1000, 400);
  expectError(await search({ nickname: "x" }), 1000, 400);
  const stranger = await createTenant(t);
  expectError(
    await call(t.app, "POST", "/v1/cardholders/search", { token: stranger.token, body: { curp: body.curp } }),
    3201,
    404,
  );
});
