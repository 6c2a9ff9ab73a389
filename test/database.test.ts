// Proves both engines return int8 as bigint (money never becomes a float) and timestamps as Date.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { sql } from "kysely";
import { migrate } from "../src/db/migrate.ts";
import { call, createSubClient, createTenant, expectOk } from "./helpers/api.ts";
import { startTestApp, type TestApp } from "./helpers/harness.ts";

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

test("int8 is bigint, timestamptz is Date, jsonb is an object", async () => {
  const { rows } = await sql<{ a: unknown; b: unknown; c: unknown; d: unknown }>`
    select 9007199254740993::int8 as a, count(*) as b, now() as c, jsonb_build_object('x', 1) as d`.execute(
    t.ctx.db,
  );
  const row = rows[0];
  assert.equal(row?.a, 9007199254740993n);
  assert.equal(typeof row?.b, "bigint");
  assert.ok(row?.c instanceof Date);
  assert.deepEqual(row?.d, { x: 1 });
});

test("migrations 0011 and 0012 succeed on data an earlier release accepted (regression, third audit)", async () => {
  // Before the fix, a database holding one abono twice ("2001" and "02001", as releases before the
  // padding stored it) or two aliases equal in NFKC could not be upgraded: the migration failed
  // on a unique index and the service would not start. Here the state before 0011 is rebuilt.
  const tenant = await createTenant(t);
  const abono = (tracking: string) =>
    call(t.app, "POST", "/v1/sandbox/spei/incoming", {
      token: tenant.token,
      body: { clabe: tenant.clabe, amount: 1, tracking_key: tracking, payer_institution: "2001" },
    });
  expectOk(await abono("DUPTK1"));
  expectOk(await abono("DUPTK2"));
  const first = await createSubClient(t, tenant);
  const second = await createSubClient(t, tenant);
  const db = t.ctx.db;
  await sql`delete from schema_migrations where version in ('0011_institution_codes_as_numbers', '0012_client_alias_normalized')`.execute(
    db,
  );
  await sql`drop index clients_root_alias_uq`.execute(db);
  await sql`create unique index clients_root_alias_uq on clients (root_id, lower(alias))`.execute(db);
  await sql`update transfer_operations set clave_rastreo = 'DUPTK1', institucion_ordenante = '02001' where clave_rastreo = 'DUPTK2'`.execute(
    db,
  );
  await sql`update clients set alias = ${"CAFÉ"} where id = ${first.clientId}`.execute(db);
  await sql`update clients set alias = ${"CAFE\u0301"} where id = ${second.clientId}`.execute(db);

  assert.deepEqual(await migrate(t.database), [
    "0011_institution_codes_as_numbers",
    "0012_client_alias_normalized",
  ]);
  const codes = await sql<{ code: string }>`
    select institucion_ordenante as code from transfer_operations where clave_rastreo = 'DUPTK1' order by code`.execute(
    db,
  );
  assert.deepEqual(
    codes.rows.map((row) => row.code),
    ["02001", "2001"],
  );
  const aliases = await sql<{ id: string; alias: string }>`
    select id, alias from clients where id in (${first.clientId}, ${second.clientId})`.execute(db);
  const aliasOf = (id: string) => aliases.rows.find((row) => row.id === id)?.alias;
  assert.equal(aliasOf(first.clientId), "CAFÉ");
  assert.equal(aliasOf(second.clientId), `CAFE\u0301 #${second.clientId.slice(0, 8)}`);
  // The earlier texts' checksums are accepted: a database that applied them starts as before.
  await sql`update schema_migrations set checksum = '5189393e0b3c8ad8abf718d80ee79f1218654e8d0365ea62bf8f2bda7f1cd7fd' where version = '0011_institution_codes_as_numbers'`.execute(
    db,
  );
  assert.deepEqual(await migrate(t.database), []);
});
