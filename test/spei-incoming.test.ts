// Proves collection accounts (a valid, unique CLABE per client) and incoming SPEI: signed abonos
// credit once through a balanced entry, unsigned/forged/stale ones are refused, unknown CLABEs
// are returned with cause 01, and the sandbox simulates transfers through the same path.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { after, before, test } from "node:test";
import fc from "fast-check";
import { sql } from "kysely";
import { isValidClabe } from "../src/domain/clabe.ts";
import { returnCauseText } from "../src/domain/spei.ts";
import { systemAccounts } from "../src/ledger/accounts.ts";
import { balanceOf, createAccount } from "../src/ledger/ledger.ts";
import { insertClient } from "../src/modules/clients/repository.ts";
import { createCollectionAccount } from "../src/modules/transfers/service.ts";
import { call, createSubClient, createTenant, expectError, expectOk, type Tenant } from "./helpers/api.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";
import { abono, assertLedgerBalanced, eventsOf, postSigned } from "./helpers/rails.ts";

const secret = "rail-secret-for-tests";
const incoming = "/v1/rails/spei/incoming";

let t: TestApp;
let tenant: Tenant;
before(async () => {
  t = await startTestApp({ speiWebhookSecret: secret });
  tenant = await createTenant(t);
});
after(() => t.close());

interface AbonoAnswer {
  mensaje: "confirmar" | "devolver";
  duplicate?: boolean;
  transfer_operation?: Record<string, unknown> & { id: string; monto: number };
  causa_devolucion?: string;
  descripcion?: string;
}

const operationsOf = async (clabe: string) =>
  t.ctx.db
    .selectFrom("transfer_operations as o")
    .innerJoin("collection_accounts as a", "a.id", "o.collection_account_id")
    .select(["o.id", "o.monto_cents"])
    .where("a.clabe", "=", clabe)
    .execute();

test("every tenant has one valid collection CLABE with the configured prefix; GET lists exactly the caller's", async () => {
  const other = await createTenant(t);
  assert.ok(isValidClabe(tenant.clabe));
  assert.match(tenant.clabe, /^646180[0-9]{12}$/);
  assert.notEqual(tenant.clabe, other.clabe);
  const data = expectOk(
    await call<{ collection_accounts: Array<Record<string, unknown>> }>(
      t.app,
      "GET",
      "/v1/transfer/clabe/collection",
      {
        token: tenant.token,
      },
    ),
  );
  assert.equal(data.collection_accounts.length, 1);
  const [account] = data.collection_accounts;
  assert.deepEqual(Object.keys(account ?? {}).sort(), [
    "bank",
    "clabe",
    "client_id",
    "created_at",
    "id",
    "status",
  ]);
  assert.equal(account?.clabe, tenant.clabe);
  assert.equal(account?.client_id, tenant.clientId);
  assert.deepEqual(account?.bank, { key: "90646", value: "STP" });
  assert.deepEqual(account?.status, { key: "ACTIVE", value: "Activo" });
  expectError(await call(t.app, "GET", "/v1/transfer/clabe/collection"), 2001, 401);
});

test("CLABE generation (property): any bank prefix gives valid, unique CLABEs carrying that prefix", async () => {
  const clientId = randomUUID();
  await t.ctx.db.transaction().execute(async (tx) => {
    await insertClient(tx, { id: clientId, name: "Clabe property", alias: "CLB" }, null);
    await createAccount(tx, { id: clientId, kind: "CLIENT_MAIN", clientId });
  });
  const seen = new Set<string>();
  await fc.assert(
    fc.asyncProperty(fc.stringMatching(/^[0-9]{3}$/), async (prefix) => {
      const { clabe } = await t.ctx.db
        .transaction()
        .execute((tx) => createCollectionAccount(tx, clientId, prefix));
      assert.ok(isValidClabe(clabe), clabe);
      assert.equal(clabe.slice(0, 3), prefix);
      assert.equal(clabe.slice(3, 6), "180");
      assert.ok(!seen.has(clabe), `duplicate ${clabe}`);
      seen.add(clabe);
    }),
    { numRuns: 40 },
  );
});

test("a signed abono to a known CLABE credits the main balance once, stores the 2.8 record and emits the event", async () => {
  const before = await balanceOf(t.ctx.db, tenant.clientId);
  const speiInBefore = await balanceOf(t.ctx.db, systemAccounts.speiIn);
  const body = abono(tenant.clabe, {
    Monto: 1234.56,
    FechaOperacion: "2025-01-20",
    TsLiquidacion: 1737380000000,
  });
  const data = expectOk(await postSigned(t, incoming, body)) as AbonoAnswer;
  assert.equal(data.mensaje, "confirmar");
  assert.equal(data.duplicate, false);
  const record = data.transfer_operation;
  assert.ok(record);
  assert.equal(record.monto, 1234.56);
  assert.equal(record.fecha_operacion, "2025-01-20");
  assert.equal(record.clave_rastreo, body.ClaveRastreo);
  assert.equal(record.transfer_id, String(body.Id));
  assert.equal(record.cuenta_beneficiario, tenant.clabe);
  assert.equal(record.institucion_ordenante, "40012");
  assert.equal(record.referencia_numerica, "1234567");
  assert.equal(record.cambio_estado_estado, "LIQUIDACION");
  assert.equal(record.ts_liquidacion, new Date(1737380000000).toISOString());
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), before + 123456n);
  assert.equal(await balanceOf(t.ctx.db, systemAccounts.speiIn), speiInBefore - 123456n);
  const events = await eventsOf(t, tenant.clientId, "transfer.in.received");
  assert.deepEqual(events.at(-1), { clabe: tenant.clabe, ...record });
  await assertLedgerBalanced(t);
});

test("unsigned, forged, tampered and stale callbacks are 2501 and credit nothing", async () => {
  const body = abono(tenant.clabe);
  const raw = JSON.stringify(body);
  const before = await balanceOf(t.ctx.db, tenant.clientId);
  const now = Math.floor(Date.now() / 1000);
  const cases = [
    postSigned(t, incoming, body, { header: null }),
    postSigned(t, incoming, body, { header: "" }),
    postSigned(t, incoming, body, { header: "garbage" }),
    postSigned(t, incoming, body, { secret: "another-secret" }),
    postSigned(t, incoming, body, { header: `t=${now},v1=${"0".repeat(64)}` }),
    // Signed over one body, sent with another (the amount raised).
    postSigned(t, incoming, body, {
      raw: raw.replace('"Monto":150.25', '"Monto":999999'),
      header: (await import("../src/modules/transfers/signature.ts")).signSpeiCallback(secret, raw, now),
    }),
    postSigned(t, incoming, body, { timestamp: now - 3600 }),
    postSigned(t, incoming, body, { timestamp: now + 3600 }),
  ];
  for (const response of await Promise.all(cases)) expectError(response, 2501, 401);
  assert.equal(await balanceOf(t.ctx.db, tenant.clientId), before);
  assert.equal((await operationsOf(tenant.clabe)).filter((o) => o.monto_cents === 999999_00n).length, 0);
  // A bearer token is no substitute for the rail's signature.
  expectError(await call(t.app, "POST", incoming, { token: tenant.token, body }), 2501, 401);
  // The signature is checked before the body is read: an unsigned call costs no parsing.
  const unread = ["{not json", `{"a":${"[".repeat(100)}`, ""];
  for (const raw of unread)
    expectError(await postSigned(t, incoming, null, { raw, header: null }), 2501, 401);
});

test("a NUL or an unpaired surrogate in a rail's text, known field or not, is replaced, not refused", async () => {
  // Regression (third audit): such an abono was 400 forever (neither credited nor returned),
  // although unknown fields are ignored and names are stored as the rail sends them.
  const fresh = await createTenant(t);
  const body = abono(fresh.clabe, {
    Monto: 9,
    NombreOrdenante: "JUAN\u0000PEREZ",
    Extra: "a\u0000b",
    Deep: { list: [1, { x: "\ud800" }] },
  });
  const answer = expectOk(await postSigned(t, incoming, body)) as AbonoAnswer;
  assert.equal(answer.mensaje, "confirmar");
  assert.equal(await balanceOf(t.ctx.db, fresh.clientId), 900n);
  const stored = await t.ctx.db
    .selectFrom("transfer_operations")
    .select("nombre_ordenante")
    .where("id", "=", answer.transfer_operation?.id ?? "")
    .executeTakeFirstOrThrow();
  assert.equal(stored.nombre_ordenante, "JUAN\ufffdPEREZ");
});

test("a signature in upper-case hex, or over a timestamp written with a leading zero, is the rail's", async () => {
  // Regression (third audit): .NET and Java write hex in upper case, and every such callback was
  // 2501; a timestamp was re-rendered as a number before checking, so "0<t>" never matched.
  const { createHmac } = await import("node:crypto");
  const fresh = await createTenant(t);
  const now = Math.floor(Date.now() / 1000);
  for (const [monto, stamp, upper] of [
    [11, String(now), true],
    [12, `0${now}`, false],
  ] as const) {
    const raw = JSON.stringify(abono(fresh.clabe, { Monto: monto }));
    const mac = createHmac("sha256", secret).update(`${stamp}.${raw}`).digest("hex");
    const header = `t=${stamp},v1=${upper ? mac.toUpperCase() : mac}`;
    expectOk(await postSigned(t, incoming, {}, { raw, header }));
  }
  assert.equal(await balanceOf(t.ctx.db, fresh.clientId), 2300n);
});

test("the same abono delivered twice (and concurrently) credits once and confirms every time", async () => {
  const fresh = await createTenant(t);
  const body = abono(fresh.clabe, { Monto: 500 });
  const first = expectOk(await postSigned(t, incoming, body)) as AbonoAnswer;
  const again = expectOk(await postSigned(t, incoming, body)) as AbonoAnswer;
  assert.equal(again.mensaje, "confirmar");
  assert.equal(again.duplicate, true);
  assert.deepEqual(again.transfer_operation, first.transfer_operation);
  const racing = abono(fresh.clabe, { Monto: 7 });
  const answers = await Promise.all(Array.from({ length: 6 }, () => postSigned(t, incoming, racing)));
  const ids = new Set(answers.map((r) => (expectOk(r) as AbonoAnswer).transfer_operation?.id));
  assert.equal(ids.size, 1);
  assert.equal(answers.filter((r) => (r.body.data as AbonoAnswer).duplicate === false).length, 1);
  assert.equal(await balanceOf(t.ctx.db, fresh.clientId), 50700n);
  assert.equal((await operationsOf(fresh.clabe)).length, 2);
  assert.equal((await eventsOf(t, fresh.clientId, "transfer.in.received")).length, 2);
  await assertLedgerBalanced(t);
});

test("a redelivery that writes the codes with other zeros is the same abono: credited once", async () => {
  // Regression (audit): InstitucionOrdenante 40012, "40012", "040012" and "0040012" credited three times.
  const fresh = await createTenant(t);
  const body = abono(fresh.clabe, { Monto: 500 });
  const first = expectOk(await postSigned(t, incoming, body)) as AbonoAnswer;
  assert.equal(first.duplicate, false);
  for (const sender of ["40012", "040012", "0040012"]) {
    const again = expectOk(
      await postSigned(t, incoming, {
        ...body,
        InstitucionOrdenante: sender,
        ReferenciaNumerica: "1234567",
      }),
    ) as AbonoAnswer;
    assert.equal(again.mensaje, "confirmar");
    assert.equal(again.duplicate, true);
  }
  assert.equal(first.transfer_operation?.institucion_ordenante, "40012");
  assert.equal(await balanceOf(t.ctx.db, fresh.clientId), 50_000n);
  // An account type written "040" is a CLABE (it was returned with cause 17).
  const padded = expectOk(
    await postSigned(
      t,
      incoming,
      abono(fresh.clabe, { TipoCuentaBeneficiario: "040", InstitucionBeneficiaria: "090646" }),
    ),
  ) as AbonoAnswer;
  assert.equal(padded.mensaje, "confirmar");
  assert.equal(padded.transfer_operation?.tipo_cuenta_beneficiario, "40");
  await assertLedgerBalanced(t);
});

test("a redelivery that spells the tracking key in another letter case is the same abono: credited once", async () => {
  // Regression (audit): MBAN… and mban… were two abonos, credited twice.
  const fresh = await createTenant(t);
  const body = abono(fresh.clabe, { ClaveRastreo: "MbAn01002503050001", Monto: 300 });
  const first = expectOk(await postSigned(t, incoming, body)) as AbonoAnswer;
  assert.deepEqual([first.duplicate, first.transfer_operation?.clave_rastreo], [false, "MBAN01002503050001"]);
  for (const spelling of ["mban01002503050001", "MBAN01002503050001", "MbAn01002503050001"]) {
    const again = expectOk(await postSigned(t, incoming, { ...body, ClaveRastreo: spelling })) as AbonoAnswer;
    assert.deepEqual([again.duplicate, again.transfer_operation?.id], [true, first.transfer_operation?.id]);
  }
  assert.equal(await balanceOf(t.ctx.db, fresh.clientId), 30_000n);
  // An abono stored as sent by an earlier release (not upper-cased) is still found by that spelling.
  const older = abono(fresh.clabe, { ClaveRastreo: "legacy0001", Monto: 5 });
  const stored = expectOk(await postSigned(t, incoming, older)) as AbonoAnswer;
  await t.ctx.db
    .updateTable("transfer_operations")
    .set({ clave_rastreo: "legacy0001" })
    .where("id", "=", stored.transfer_operation?.id ?? "")
    .execute();
  const redelivered = expectOk(await postSigned(t, incoming, older)) as AbonoAnswer;
  assert.deepEqual(
    [redelivered.duplicate, redelivered.transfer_operation?.id],
    [true, stored.transfer_operation?.id],
  );
  assert.equal(await balanceOf(t.ctx.db, fresh.clientId), 30_500n);
  await assertLedgerBalanced(t);
});

test("Banxico's own code (2001) is stored as the catalog's key, and its redelivery with other zeros is the same abono", async () => {
  // Regression (domain audit): codes were padded to five digits, so Banxico was stored "02001", a
  // code the catalog (and transfers out) do not know.
  const fresh = await createTenant(t);
  const body = abono(fresh.clabe, { InstitucionOrdenante: "02001", Monto: 7 });
  const first = expectOk(await postSigned(t, incoming, body)) as AbonoAnswer;
  assert.equal(first.transfer_operation?.institucion_ordenante, "2001");
  const again = expectOk(
    await postSigned(t, incoming, { ...body, InstitucionOrdenante: 2001 }),
  ) as AbonoAnswer;
  assert.equal(again.duplicate, true);
  assert.equal(await balanceOf(t.ctx.db, fresh.clientId), 700n);
  const institutions = expectOk(
    await call(t.app, "GET", "/v1/catalogs/transfer_institutions", { token: fresh.token }),
  ) as { transfer_institutions: Array<{ key: string }> };
  assert.ok(institutions.transfer_institutions.some((item) => item.key === "2001"));
});

test("the same tracking key and day on a different transfer is returned with cause 30", async () => {
  const fresh = await createTenant(t);
  const body = abono(fresh.clabe, { Monto: 10 });
  expectOk(await postSigned(t, incoming, body));
  const clash = expectOk(await postSigned(t, incoming, { ...body, Monto: 11 })) as AbonoAnswer;
  assert.deepEqual(clash, {
    mensaje: "devolver",
    causa_devolucion: "30",
    descripcion: "Clave de rastreo duplicada para el emisor y día de operación",
  });
  // The same key from another sending participant is another transfer.
  const other = expectOk(
    await postSigned(t, incoming, { ...body, InstitucionOrdenante: 40014 }),
  ) as AbonoAnswer;
  assert.equal(other.duplicate, false);
  assert.equal(await balanceOf(t.ctx.db, fresh.clientId), 2000n);
});

test("an unknown CLABE is returned with cause 01 and credits nothing; another participant's 06, a non-CLABE account type 17, no reference 14, above the limit 20", async () => {
  const speiIn = await balanceOf(t.ctx.db, systemAccounts.speiIn);
  const unknown = "646180999999999990";
  const data = expectOk(await postSigned(t, incoming, abono(unknown))) as AbonoAnswer;
  assert.deepEqual(data, { mensaje: "devolver", causa_devolucion: "01", descripcion: "Cuenta inexistente" });
  const foreign = expectOk(await postSigned(t, incoming, abono("032180000118359719"))) as AbonoAnswer;
  assert.equal(foreign.causa_devolucion, "01");
  const typed = expectOk(
    await postSigned(t, incoming, abono(tenant.clabe, { TipoCuentaBeneficiario: 3 })),
  ) as AbonoAnswer;
  assert.equal(typed.causa_devolucion, "17");
  // Regression (contract audit): both were credited.
  // Addressed to another participant (BBVA, 40012) though the CLABE is STP's (646): cause 06.
  // Regression (domain audit): any code ending in 646 was taken for STP's (40646, "1646", 9990646).
  for (const institution of [40012, "40012", "12", 0, 40646, "1646", 9990646]) {
    const elsewhere = expectOk(
      await postSigned(t, incoming, abono(tenant.clabe, { InstitucionBeneficiaria: institution })),
    ) as AbonoAnswer;
    assert.deepEqual(elsewhere, {
      mensaje: "devolver",
      causa_devolucion: "06",
      descripcion: "Cuenta no pertenece al participante receptor",
    });
  }
  // SPEI's numeric reference is greater than 0: a 0 is missing mandatory information, cause 14.
  for (const reference of [0, "0", "0000000"]) {
    const unreferenced = expectOk(
      await postSigned(t, incoming, abono(tenant.clabe, { ReferenciaNumerica: reference })),
    ) as AbonoAnswer;
    assert.equal(unreferenced.causa_devolucion, "14");
  }
  // Above 10,000,000.00, however far: cause 20, never a 400 the rail would retry. Regression
  // (audit): from 90,071,992,547,409.92 up (2^53 centavos) it was 400 "must be at most ...".
  for (const monto of ["10000000.01", "90071992547409.92", "1e15", "9007199254740992", "1e21", "1e300"]) {
    const raw = JSON.stringify(abono(tenant.clabe)).replace(/"Monto":[^,}]+/, `"Monto":${monto}`);
    const above = expectOk(await postSigned(t, incoming, null, { raw })) as AbonoAnswer;
    assert.deepEqual(
      above,
      { mensaje: "devolver", causa_devolucion: "20", descripcion: returnCauseText("20") },
      monto,
    );
  }
  // Still malformed, however large: more than 2 decimals, or a number that is not positive.
  for (const monto of ["20000000.001", "-1e15"]) {
    const raw = JSON.stringify(abono(tenant.clabe)).replace(/"Monto":[^,}]+/, `"Monto":${monto}`);
    expectError(await postSigned(t, incoming, null, { raw }), 1000, 400);
  }
  assert.equal(await balanceOf(t.ctx.db, systemAccounts.speiIn), speiIn);
  assert.equal((await operationsOf(unknown)).length, 0);
});

test("a signed but malformed abono is 400 with the failed fields; STP-style integer and text forms both parse", async () => {
  const bad = expectError(
    await postSigned(
      t,
      incoming,
      abono(tenant.clabe, { Monto: 1.234, ClaveRastreo: "con espacio", FechaOperacion: 20250230 }),
    ),
    1000,
    400,
  );
  const fields = (bad.body.data as { details: Array<{ field: string }> }).details.map((d) => d.field);
  assert.ok(fields.includes("Monto") && fields.includes("ClaveRastreo"), fields.join());
  const ok = expectOk(
    await postSigned(
      t,
      incoming,
      abono(tenant.clabe, {
        FechaOperacion: "20250121",
        InstitucionOrdenante: "40012",
        ReferenciaNumerica: "77",
        Extra: 1,
      }),
    ),
  ) as AbonoAnswer;
  assert.equal(ok.transfer_operation?.fecha_operacion, "2025-01-21");
  expectError(await postSigned(t, incoming, abono(tenant.clabe, { FechaOperacion: 20250230 })), 1000, 400);
  // Regression (contract audit): year 0000 is a date to JavaScript, not to PostgreSQL (a 500 the
  // rail would retry for ever).
  for (const fields of [{ FechaOperacion: "0000-01-01" }, { FechaOperacion: "00000101" }]) {
    expectError(await postSigned(t, incoming, abono(tenant.clabe, fields)), 1000, 400);
  }
  // An optional TsLiquidacion never bounces an abono: one that names no instant is absent (the
  // arrival time is kept, as without one), and a time without a zone is Mexico City's (SPEI's).
  // Regression (audit): both were 400.
  for (const [ts, stored] of [
    ["0000-01-01T00:00:00Z", null],
    [253402300800000, null],
    ["yesterday", null],
    ["2025-03-05T10:00:00", "2025-03-05T16:00:00.000Z"],
    ["2025-03-05 10:00:00.250", "2025-03-05T16:00:00.250Z"],
    ["2025-03-05T10:00:00-05:00", "2025-03-05T15:00:00.000Z"],
  ] as const) {
    const taken = expectOk(
      await postSigned(t, incoming, abono(tenant.clabe, { TsLiquidacion: ts })),
    ) as AbonoAnswer;
    assert.equal(taken.mensaje, "confirmar", String(ts));
    const [row] = await t.ctx.db
      .selectFrom("transfer_operations")
      .select("ts_liquidacion")
      .where("id", "=", taken.transfer_operation?.id ?? "")
      .execute();
    const kept = new Date(row?.ts_liquidacion ?? 0);
    if (stored) assert.equal(kept.toISOString(), stored, String(ts));
    else assert.ok(Math.abs(Date.now() - kept.getTime()) < 60_000, `${ts}: ${kept.toISOString()}`);
  }
  expectError(await postSigned(t, incoming, null, { raw: "{not json" }), 1001, 400);
});

test("a sandbox abono names the receiving client in its first 40 characters, whole", async () => {
  // Regression (audit): the name was cut at 40 UTF-16 units, so a 30-character name with emoji
  // lost its end and had a character cut in half.
  const name = `N${"😀".repeat(29)}`;
  const receiver = await createSubClient(t, await createTenant(t), 0, { name });
  const answer = expectOk(
    await call<AbonoAnswer>(t.app, "POST", "/v1/sandbox/spei/incoming", {
      token: receiver.token,
      body: { clabe: receiver.clabe, amount: 1 },
    }),
  );
  assert.equal(answer.mensaje, "confirmar");
  assert.equal(answer.transfer_operation?.nombre_beneficiario, name);
});

test("with no secret configured the rail routes refuse every call with 6501", async () => {
  const bare = await startTestApp();
  try {
    const someone = await createTenant(bare);
    const body = abono(someone.clabe);
    expectError(await postSigned(bare, incoming, body, { secret: "anything" }), 6501, 503);
    expectError(await postSigned(bare, incoming, body, { header: null }), 6501, 503);
    expectError(await postSigned(bare, "/v1/rails/spei/order-state", {}, { secret: "x" }), 6501, 503);
    assert.equal(await balanceOf(bare.ctx.db, someone.clientId), 0n);
  } finally {
    await bare.close();
  }
});

test("sandbox incoming credits one of your CLABEs through the same path; another tenant's CLABE is 404", async () => {
  const fresh = await createTenant(t);
  const sandbox = (token: string, body: unknown, key?: string) =>
    call<AbonoAnswer>(t.app, "POST", "/v1/sandbox/spei/incoming", {
      token,
      body,
      ...(key ? { headers: { "idempotency-key": key } } : {}),
    });
  const first = expectOk(await sandbox(fresh.token, { clabe: fresh.clabe, amount: 250.5 }, "in-1"));
  assert.equal(first.mensaje, "confirmar");
  assert.equal(first.transfer_operation?.monto, 250.5);
  assert.equal(first.transfer_operation?.cuenta_beneficiario, fresh.clabe);
  const replay = await sandbox(fresh.token, { clabe: fresh.clabe, amount: 250.5 }, "in-1");
  assert.equal(replay.headers["idempotent-replayed"], "true");
  assert.deepEqual(replay.body, { success: true, code: 0, message: "OK", data: first });
  const fixed = { clabe: fresh.clabe, amount: 1, tracking_key: "SBXFIXED1", operation_date: "2025-02-01" };
  expectOk(await sandbox(fresh.token, fixed));
  assert.equal(expectOk(await sandbox(fresh.token, fixed)).duplicate, true);
  assert.equal(await balanceOf(t.ctx.db, fresh.clientId), 25150n);
  expectError(await sandbox(tenant.token, { clabe: fresh.clabe, amount: 1 }), 3501, 404);
  expectError(await sandbox(fresh.token, { clabe: "646180999999999990", amount: 1 }), 3501, 404);
  expectError(await sandbox(fresh.token, { clabe: fresh.clabe, amount: 0 }), 1000, 400);
  expectError(
    await sandbox(fresh.token, { clabe: fresh.clabe, amount: 1, operation_date: "0000-01-01" }),
    1000,
    400,
  );
  // Regression (contract audit): the sandbox refused with 1000 what the rail's path returns with a
  // cause, and kept the reference's zeros where the rail keeps its number.
  for (const [body, cause] of [
    [{ numeric_reference: "000" }, "14"],
    [{ amount: 10_000_000.01 }, "20"],
    [{ amount: 1e15 }, "20"],
    [{ amount: 1e300 }, "20"],
  ] as const) {
    const returned = expectOk(await sandbox(fresh.token, { clabe: fresh.clabe, amount: 1, ...body }));
    assert.equal(returned.mensaje, "devolver");
    assert.equal(returned.causa_devolucion, cause);
  }
  const padded = expectOk(
    await sandbox(fresh.token, { clabe: fresh.clabe, amount: 1, numeric_reference: "0001234" }),
  );
  assert.equal(padded.transfer_operation?.referencia_numerica, "1234");
  expectError(
    await sandbox(fresh.token, { clabe: fresh.clabe, amount: 1, numeric_reference: "12345678" }),
    1000,
    400,
  );
  assert.equal(await balanceOf(t.ctx.db, fresh.clientId), 25250n);
  assert.equal((await eventsOf(t, fresh.clientId, "transfer.in.received")).length, 3);
  await assertLedgerBalanced(t);
});

test("abonos stored as sent by an earlier release are upper-cased (migration 0021): a redelivery in another case is credited once", async () => {
  // Regression (money audit): a row stored as mban… was found by that spelling only, so the
  // rail's MBAN… missed it, passed the (case-sensitive) unique key and was credited again.
  const fresh = await createTenant(t);
  const send = (key: string, monto: number) =>
    postSigned(t, incoming, abono(fresh.clabe, { ClaveRastreo: key, Monto: monto })).then(
      (answer) => expectOk(answer) as AbonoAnswer,
    );
  const lower = await send("mban01002503059001", 150.25);
  // Two rows of one key in two non-upper spellings (two deliveries of an earlier release: its
  // double credit) and one whose upper-case spelling is stored too.
  const twinA = await send("MBAN01002503059002", 1);
  const twinB = await send("MBAN01002503059003", 2);
  const taken = await send("MBAN01002503059004", 3);
  const alsoLower = await send("MBAN01002503059005", 4);
  const asSent = async (id: string | undefined, key: string) =>
    sql`update transfer_operations set clave_rastreo = ${key} where id = ${id ?? ""}`.execute(t.ctx.db);
  await asSent(lower.transfer_operation?.id, "mban01002503059001");
  await asSent(twinA.transfer_operation?.id, "mban01002503059002");
  await asSent(twinB.transfer_operation?.id, "Mban01002503059002");
  await asSent(alsoLower.transfer_operation?.id, "mban01002503059004");
  const before = await balanceOf(t.ctx.db, fresh.clientId);
  const migration = await readFile(
    new URL("../src/db/migrations/0021_abono_keys_upper_case.sql", import.meta.url),
    "utf8",
  );
  await sql.raw(migration).execute(t.ctx.db);
  const keyOf = async (id: string | undefined) =>
    (
      await sql<{
        k: string;
      }>`select clave_rastreo as k from transfer_operations where id = ${id ?? ""}`.execute(t.ctx.db)
    ).rows[0]?.k;
  assert.deepEqual(
    await Promise.all([lower, twinA, twinB, taken, alsoLower].map((x) => keyOf(x.transfer_operation?.id))),
    [
      "MBAN01002503059001",
      "MBAN01002503059002",
      "Mban01002503059002",
      "MBAN01002503059004",
      "mban01002503059004",
    ],
  );
  for (const spelling of ["MBAN01002503059001", "mban01002503059001", "mBaN01002503059001"]) {
    const again = await send(spelling, 150.25);
    assert.deepEqual([again.duplicate, again.transfer_operation?.id], [true, lower.transfer_operation?.id]);
  }
  assert.equal(await balanceOf(t.ctx.db, fresh.clientId), before);
  await assertLedgerBalanced(t);
});
