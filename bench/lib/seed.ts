import { execFile } from "node:child_process";
import { generateKeyPairSync, randomUUID } from "node:crypto";
import { promisify } from "node:util";
import { deriveKeyRing, parseMasterKey } from "../../src/crypto/keys.ts";
import { encryptFor } from "../../src/crypto/rsa.ts";
import { open } from "../../src/crypto/vault.ts";
import { cardholderBody, subclientBody } from "../../test/helpers/people.ts";
import type { Postgres } from "./pg.ts";

const run = promisify(execFile);

/** Seeding through the CLI and the API (as an integrator would), and SQL for bulk history. */
export interface Client {
  clientId: string;
  token: string;
  apiKey: string;
  password: string;
}

export async function api<T>(
  base: string,
  method: string,
  path: string,
  token: string | undefined,
  body?: unknown,
): Promise<T> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const envelope = (await response.json()) as { success: boolean; data: T; code: number; message: string };
  if (!envelope.success)
    throw new Error(`${method} ${path}: ${response.status} ${envelope.code} ${envelope.message}`);
  return envelope.data;
}

/** Runs `work` over `items` with at most `concurrency` at a time, keeping the order of results. */
export async function pool<I, O>(
  items: I[],
  concurrency: number,
  work: (item: I, index: number) => Promise<O>,
): Promise<O[]> {
  const results: O[] = new Array(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index] as I, index);
    }
  });
  await Promise.all(workers);
  return results;
}

export async function login(base: string, apiKey: string, password: string): Promise<string> {
  const data = await api<{ token: string }>(base, "POST", "/v1/auth/login", undefined, {
    api_client: { api_key: apiKey, password },
  });
  return data.token;
}

/** `emisor tenant create --json`, against the same database and master key as the server. */
export async function createTenantWithCli(
  env: Record<string, string>,
  base: string,
  available: string,
): Promise<Client & { clabe: string }> {
  const { stdout } = await run(
    process.execPath,
    [
      "dist/src/cli/main.js",
      "tenant",
      "create",
      "--name",
      "Bench tenant",
      "--available",
      available,
      "--json",
    ],
    {
      env: { ...process.env, ...env },
    },
  );
  const created = JSON.parse(stdout) as { client_id: string; api_key: string; password: string };
  const token = await login(base, created.api_key, created.password);
  return {
    clientId: created.client_id,
    apiKey: created.api_key,
    password: created.password,
    token,
    clabe: await collectionClabe(base, token),
  };
}

/** The caller's own client id (GET /v1/clients/balance). */
export async function ownClientId(base: string, token: string): Promise<string> {
  return (await api<{ balance: { client_id: string } }>(base, "GET", "/v1/clients/balance", token)).balance
    .client_id;
}

/** The caller's first collection CLABE. */
export async function collectionClabe(base: string, token: string): Promise<string> {
  const collection = await api<{ collection_accounts: Array<{ clabe: string }> }>(
    base,
    "GET",
    "/v1/transfer/clabe/collection",
    token,
  );
  return collection.collection_accounts[0]?.clabe ?? "";
}

export interface SeededCard {
  id: string;
  cardholderId: string;
  ownerClientId: string;
}

/**
 * A product of `owner` with `count` cards assigned to new cardholders of `forClients` (round robin;
 * default the owner) and activated. The owner must be the clients' ancestor.
 */
export async function seedCards(
  base: string,
  owner: Client,
  count: number,
  options: { forClients?: string[]; commission?: number } = {},
): Promise<SeededCard[]> {
  const products = await api<{ products: { detail: Array<{ id: string }> } }>(
    base,
    "POST",
    "/v1/products",
    owner.token,
    {
      name: "Bench",
      description: "Bench cards",
      card_type: "PHYSICAL",
      bin: "53112233",
      affinity_group: "BENCH",
      transfer_commission: options.commission ?? 0,
    },
  );
  const productId = products.products.detail[0]?.id ?? "";
  for (let minted = 0; minted < count; minted += 10_000) {
    await api(base, "POST", `/v1/products/${productId}/stock`, owner.token, {
      quantity: Math.min(10_000, count - minted),
    });
  }
  const clients = options.forClients ?? [owner.clientId];
  return pool(
    Array.from({ length: count }, (_, i) => i),
    16,
    async (i) => {
      const clientId = clients[i % clients.length] ?? owner.clientId;
      const extra = clientId === owner.clientId ? {} : { client_id: clientId };
      const holder = await api<{ cardholder: { id: string } }>(
        base,
        "POST",
        "/v1/cardholders",
        owner.token,
        cardholderBody(extra),
      );
      const assigned = await api<{ card: { id: string } }>(base, "PUT", "/v1/cards", owner.token, {
        cardholder_id: holder.cardholder.id,
        product_id: productId,
        document_type: "INE",
        document_number: "BENCH",
        observations: "",
        shipping_method: "B2B",
        delivery_type: "STANDARD",
        delivery_address: null,
      });
      await api(base, "POST", "/v1/cards/activate", owner.token, {
        card_number: assigned.card.id,
        latitude: 19.4,
        longitude: -99.1,
      });
      return { id: assigned.card.id, cardholderId: holder.cardholder.id, ownerClientId: clientId };
    },
  );
}

/** `count` sub-clients of `parent`, each funded with `available` pesos and logged in. */
export async function seedSubclients(
  base: string,
  parent: Client,
  count: number,
  available: number,
): Promise<Client[]> {
  return pool(
    Array.from({ length: count }, (_, i) => i),
    4,
    async () => {
      const password = `bench-${randomUUID()}`.slice(0, 30);
      const data = await api<{ subclient: { id: string; api_client: { api_key: string } } }>(
        base,
        "POST",
        "/v1/clients",
        parent.token,
        subclientBody({ available, api_key_password: password }),
      );
      const apiKey = data.subclient.api_client.api_key;
      return { clientId: data.subclient.id, apiKey, password, token: await login(base, apiKey, password) };
    },
  );
}

export async function pay(base: string, token: string, cardId: string, amount: number): Promise<void> {
  await api(base, "POST", "/v1/cards/payment", token, {
    card_number: cardId,
    amount,
    payment_description: "fondeo",
    latitude: 19.4,
    longitude: -99.1,
  });
}

/**
 * The system's public key, which card numbers and PINs are ciphered under (contract 4.1), as an
 * integrator gets it: Emisor answers it to an API key that registered a public key of its own.
 */
export async function systemPublicKey(base: string, token: string): Promise<string> {
  const { publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  await api(base, "POST", "/v1/clients/api_key/public_key", token, {
    public_key: publicKey.export({ type: "spki", format: "pem" }).toString(),
  });
  const keys = await api<{ system: { public_key: string } }>(
    base,
    "GET",
    "/v1/clients/api_key/public_key",
    token,
  );
  return keys.system.public_key;
}

export async function setPins(
  base: string,
  token: string,
  publicPem: string,
  cards: SeededCard[],
  pin: string,
): Promise<void> {
  await pool(cards, 16, (card) =>
    api(base, "PUT", "/v1/cards/pin", token, { card_number: card.id, pin: encryptFor(publicPem, pin) }),
  );
}

/** Each card's number ciphered under the system key, as an integrator sends it (RSA-OAEP). */
export async function cipheredPans(
  pgs: Postgres,
  database: string,
  masterKey: string,
  publicPem: string,
  cards: SeededCard[],
): Promise<string[]> {
  const keys = deriveKeyRing(parseMasterKey(masterKey));
  const rows = await pgs.sql<{ id: string; pan_sealed: string }>(
    database,
    "select id, pan_sealed from cards where id = any($1)",
    [cards.map((c) => c.id)],
  );
  const sealed = new Map(rows.map((r) => [r.id, r.pan_sealed]));
  return cards.map((card) => encryptFor(publicPem, open(keys.vault, sealed.get(card.id) ?? "", card.id)));
}

/**
 * `total` incoming transfers on one CLABE, as the service writes them (dense day positions, the
 * day counters, one ledger entry crediting the total), spread over `days` operation days.
 */
export async function seedTransfers(
  pgs: Postgres,
  database: string,
  clabe: string,
  total: number,
  days: number,
): Promise<void> {
  const [account] = await pgs.sql<{ id: string; client_id: string }>(
    database,
    "select id, client_id from collection_accounts where clabe = $1",
    [clabe],
  );
  if (!account) throw new Error(`no collection account ${clabe}`);
  const entryId = randomUUID();
  const cents = String(BigInt(total) * 100n);
  await pgs.sql(
    database,
    `with e as (insert into journal_entries (id, kind, client_id) values ($1, 'BENCH_SEED', $2) returning id),
      p as (insert into postings (entry_id, account_id, amount_cents) values ($1, '00000000-0000-4000-8000-000000000002', -$3::bigint), ($1, $2, $3::bigint)),
      a as (update ledger_accounts set balance_cents = balance_cents - $3::bigint where id = '00000000-0000-4000-8000-000000000002')
     update ledger_accounts set balance_cents = balance_cents + $3::bigint where id = $2`,
    [entryId, account.client_id, cents],
  );
  // As the history: chunks on two connections, no foreign-key checks (valid by construction).
  const chunks = Array.from({ length: Math.ceil(total / 200_000) }, (_, i) => i * 200_000);
  await pool(chunks, 2, async (from) => {
    const to = Math.min(total, from + 200_000) - 1;
    await pgs.sql(
      database,
      `insert into transfer_operations (id, collection_account_id, client_id, transfer_id, fecha_operacion, day_seq,
        institucion_ordenante, institucion_beneficiaria, clave_rastreo, monto_cents, nombre_beneficiario,
        tipo_cuenta_beneficiario, cuenta_beneficiario, rfc_curp_beneficiario, concepto_pago, referencia_numerica,
        nombre_ordenante, tipo_cuenta_ordenante, cuenta_ordenante, rfc_curp_ordenante, cambio_estado_detalle,
        cambio_estado_causa_devolucion, cambio_estado_estado, email_beneficiario, ts_liquidacion, entry_id)
      select gen_random_uuid(), $1, $2, 'B' || i, date '2026-01-01' + (i % $5), i / $5 + 1,
        '40012', '90646', 'BENCH' || lpad(i::text, 12, '0'), 100, 'BENCH', '40', $6, 'ND',
        'Bench', '1', 'ORDENANTE', '40', '012180000118359713', 'ND', 'Abono acreditado', '', 'LIQUIDACION', '',
        now(), $7
      from generate_series($3::int, $4::int) as i`,
      [account.id, account.client_id, from, to, days, clabe, entryId],
      { bulk: true },
    );
  });
  await pgs.sql(
    database,
    `insert into transfer_operation_days (collection_account_id, fecha_operacion, operations)
     select collection_account_id, fecha_operacion, count(*) from transfer_operations where collection_account_id = $1 group by 1, 2`,
    [account.id],
  );
}

/**
 * SQL for a version-7 UUID made at `millis` (a bigint expression), as the service makes entry ids
 * (src/ledger/ids.ts): the milliseconds over the first 6 bytes of a random UUID, version bits 0111.
 */
function timeOrderedUuidSql(millis: string): string {
  return `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing substring(int8send(${millis}) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid`;
}

/**
 * `total` journal entries of history (each moving one centavo between two accounts of a throwaway
 * client, with its two postings), so that a run can be measured on a grown ledger. Their ids are
 * time-ordered, as the service's own, from a day ago, 100 per millisecond.
 */
export async function seedHistory(pgs: Postgres, database: string, total: number): Promise<void> {
  const [root] = await pgs.sql<{ id: string }>(
    database,
    "select id from clients order by created_at limit 1",
  );
  const a = randomUUID();
  await pgs.sql(
    database,
    "insert into ledger_accounts (id, kind, client_id, allow_negative) values ($1, 'CARD', $2, false)",
    [a, root?.id],
  );
  // Chunks of 250,000 on two connections at once (one per core), with no foreign-key checks:
  // every row is valid by construction.
  const chunks = Array.from({ length: Math.ceil(total / 250_000) }, (_, i) => i * 250_000);
  await pool(chunks, 2, async (from) => {
    const to = Math.min(total, from + 250_000) - 1;
    await pgs.sql(
      database,
      `with e as (insert into journal_entries (id, kind, client_id, created_at)
                  select ${timeOrderedUuidSql("(extract(epoch from now() - interval '1 day') * 1000)::bigint + i / 100")},
                    'HISTORY', $1, now() - interval '1 day' from generate_series($2::int, $3::int) as i returning id)
       insert into postings (entry_id, account_id, amount_cents)
       select id, x.account, x.amount from e, (values ('00000000-0000-4000-8000-000000000001'::uuid, -1), ($4::uuid, 1)) x(account, amount)`,
      [root?.id, from, to, a],
      { bulk: true },
    );
  });
  await pgs.sql(
    database,
    "update ledger_accounts set balance_cents = balance_cents - $1 where id = '00000000-0000-4000-8000-000000000001'",
    [total],
  );
  await pgs.sql(database, "update ledger_accounts set balance_cents = balance_cents + $1 where id = $2", [
    total,
    a,
  ]);
}
