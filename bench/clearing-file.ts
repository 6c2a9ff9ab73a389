/**
 * A clearing file of N lines (default 100,000) uploaded to the production build of Emisor on a
 * fresh PostgreSQL database, timed end to end:
 *
 *   node --import tsx bench/clearing-file.ts [lines]
 *
 * Seeds through the CLI and the API as bench/run.ts does (a tenant, ~10,000 active funded cards:
 * one per 10 lines, at most 10,000), then pending authorizations on them by SQL. The file (NDJSON)
 * is 90% clearings of those holds (every 20th for more than authorized), 5% force posts and 5%
 * returns. While it runs, a probe sends one authorization at a time on the messages route, so the
 * file's cost to other work shows as that probe's latency. Prints the seconds, lines per second,
 * the CPU per line and the server's memory; checks the report, that each line was recorded once,
 * that a repeat answers the same report, and the books; exits 1 if any is wrong. The target is
 * 100,000 lines in at most 60 s on 2 cores. DATABASE_URL (default
 * postgres://postgres@127.0.0.1:5432/postgres) is the server the databases are made on.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { signSpeiCallback } from "../src/modules/transfers/signature.ts";
import { checkBooks } from "./lib/books.ts";
import { countPostgresOf, cpuSnapshot, describeCpu } from "./lib/cpu.ts";
import { Postgres } from "./lib/pg.ts";
import * as seed from "./lib/seed.ts";
import { emisorEnv, ServerProcess } from "./lib/server.ts";

const lines = Number(process.argv[2] ?? 100_000);
const cardCount = Math.min(10_000, Math.max(10, Math.ceil(lines / 10)));
const secret = "bench-card-network-secret";
const merchant = { name: "BENCH STORE", city: "CDMX", country: "MEX", mcc: "5411" };
const pgs = new Postgres(process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/postgres");
const database = `emisor_bench_clearing_${Date.now()}`;
const step = (text: string) => process.stdout.write(`== ${text}\n`);

/**
 * POSTs a signed body to the card network's routes (JSON, or bytes as given in `raw`, NDJSON); the
 * envelope's data, or a thrown error.
 */
async function signed<T>(
  base: string,
  path: string,
  body: unknown,
  raw?: string,
): Promise<{ data: T; ms: number }> {
  const bytes = raw ?? JSON.stringify(body);
  const started = performance.now();
  const response = await fetch(`${base}${path}`, {
    method: "POST",
    headers: {
      "content-type": raw === undefined ? "application/json" : "application/x-ndjson",
      "x-card-network-signature": signSpeiCallback(secret, bytes, Math.floor(Date.now() / 1000)),
    },
    body: bytes,
  });
  const envelope = (await response.json()) as { success: boolean; data: T; code: number; message: string };
  if (!envelope.success) throw new Error(`${path}: ${response.status} ${envelope.code} ${envelope.message}`);
  return { data: envelope.data, ms: performance.now() - started };
}

interface Hold {
  authorizationId: string;
  cents: number;
}

/**
 * Cards funded with 5,000.00 each, and ~0.9 x lines holds of 1.00-50.99 spread over them. The holds
 * are written by SQL as holdOnCard writes them (the authorization, a CARD_HOLD entry from the card
 * to a CARD_HOLDS shard, both balances): through the messages route 90,000 of them would take
 * minutes to seed, and the route's own rate is not what this bench measures.
 */
async function seedHolds(
  base: string,
  env: Record<string, string>,
): Promise<{ cards: string[]; holds: Hold[] }> {
  const tenant = await seed.createTenantWithCli(env, base, String(cardCount * 5_000 + 1_000));
  const started = performance.now();
  const cards = (await seed.seedCards(base, tenant, cardCount)).map((card) => card.id);
  await seed.pool(cards, 16, (card) => seed.pay(base, tenant.token, card, 5_000));
  step(`${cards.length} cards seeded and funded in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  const holds = Array.from({ length: Math.round(lines * 0.9) }, (_, i) => ({
    authorizationId: randomUUID(),
    entryId: randomUUID(),
    cardId: cards[i % cards.length] ?? "",
    cents: 100 + ((i * 7919) % 5_000),
    shard: `00000000-0000-4000-8007-${(1 + (i % 15)).toString(16).padStart(12, "0")}`,
  }));
  const column = <T>(pick: (hold: (typeof holds)[number]) => T) => holds.map(pick);
  await pgs.sql(
    database,
    `with h as (select * from unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::bigint[], $5::uuid[])
        as h(id, entry_id, card_id, cents, shard)),
      a as (insert into card_authorizations (id, card_id, client_id, status, currency, merchant_amount,
          requested_cents, authorized_cents, held_cents, authorization_code, channel, merchant, mcc,
          hold_account_id, expires_at)
        select h.id, h.card_id, c.client_id, 'PENDING', '484', h.cents, h.cents, h.cents, h.cents, '000000',
          'POS_CHIP', $6::jsonb, '5411', h.shard, now() + interval '7 days'
        from h join cards c on c.id = h.card_id returning 1),
      e as (insert into journal_entries (id, kind, description, client_id, metadata)
        select h.entry_id, 'CARD_HOLD', 'BENCH STORE', c.client_id, jsonb_build_object('authorization_id', h.id)
        from h join cards c on c.id = h.card_id returning 1),
      p as (insert into postings (entry_id, account_id, amount_cents)
        select entry_id, card_id, -cents from h union all select entry_id, shard, cents from h returning 1),
      d as (update ledger_accounts a set balance_cents = a.balance_cents - t.total
        from (select card_id, sum(cents) as total from h group by card_id) t where a.id = t.card_id returning 1),
      s as (update ledger_accounts a set balance_cents = a.balance_cents + t.total
        from (select shard, sum(cents) as total from h group by shard) t where a.id = t.shard returning 1)
    select (select count(*) from a) + (select count(*) from e) + (select count(*) from p)
      + (select count(*) from d) + (select count(*) from s) as n`,
    [
      column((h) => h.authorizationId),
      column((h) => h.entryId),
      column((h) => h.cardId),
      column((h) => String(h.cents)),
      column((h) => h.shard),
      JSON.stringify(merchant),
    ],
  );
  step(`${holds.length} pending authorizations seeded`);
  return { cards, holds };
}

/** The file: the holds cleared (every 20th for 10% more), then force posts and returns. */
function fileLines(cards: string[], holds: Hold[]): Array<Record<string, unknown>> {
  const file: Array<Record<string, unknown>> = holds.map((hold, i) => ({
    message_id: `BENCH-CLR-${i}`,
    type: "CLEARING",
    authorization_id: hold.authorizationId,
    amount: i % 20 === 0 ? Math.round(hold.cents * 1.1) : hold.cents,
  }));
  for (let i = 0; file.length < lines; i++) {
    const type = i % 2 === 0 ? "CLEARING" : "RETURN";
    const card = cards[(i * 31) % cards.length];
    file.push({ message_id: `BENCH-${type}-${i}`, type, card_id: card, amount: 250 + (i % 900), merchant });
  }
  return file;
}

/** One authorization at a time on the messages route while the file runs: their latencies. */
function probe(base: string, cards: string[]): { stop: () => Promise<number[]> } {
  const latencies: number[] = [];
  let running = true;
  const loop = (async () => {
    for (let i = 0; running; i++) {
      const { ms } = await signed(base, "/v1/rails/cards/messages", {
        message_id: `BENCH-PROBE-${randomUUID()}`,
        type: "AUTHORIZATION",
        card_id: cards[(i * 17) % cards.length],
        amount: 100,
        merchant,
        channel: "CONTACTLESS",
      });
      latencies.push(ms);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return latencies.sort((a, b) => a - b);
    },
  };
}

/** The largest V8 heap the server reports (/metrics, every 250 ms) until stopped, in MB. */
function heapWatch(server: ServerProcess): { stop: () => Promise<number> } {
  let peak = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const text = await (await fetch(`${server.url}/metrics`)).text();
      const used = Number(/^emisor_nodejs_heap_size_used_bytes (\S+)$/m.exec(text)?.[1] ?? 0);
      peak = Math.max(peak, used / 1048576);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return Math.round(peak);
    },
  };
}

async function upload(server: ServerProcess, cards: string[], holds: Hold[]): Promise<void> {
  const file = fileLines(cards, holds);
  const fileId = `BENCH-FILE-${Date.now()}`;
  const ndjson = [{ file_id: fileId }, ...file].map((line) => JSON.stringify(line)).join("\n");
  const idle = await server.metrics();
  process.stdout.write(`server before the upload: ${idle.memory}\n`);
  const probing = probe(server.url, cards);
  const heap = heapWatch(server);
  server.resetPeakRss();
  const cpuBefore = cpuSnapshot(server.pid);
  const { data: report, ms } = await signed<Record<string, { count: number }>>(
    server.url,
    "/v1/rails/cards/clearing_files",
    undefined,
    ndjson,
  );
  const cpu = describeCpu(cpuBefore, cpuSnapshot(server.pid), file.length, ms / 1000);
  const latencies = await probing.stop();
  const loop = await server.metrics();
  process.stdout.write(`event-loop delay p99 during the upload: ${loop.eventLoopP99Ms.toFixed(1)} ms\n`);
  process.stdout.write(
    `server memory during the upload: peak RSS ${server.peakRssMb()} MB, V8 heap up to ${await heap.stop()} MB\n`,
  );
  const at = (q: number) =>
    Math.round(latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))] ?? 0);
  step(
    `${file.length} lines in ${(ms / 1000).toFixed(1)} s: ${Math.round(file.length / (ms / 1000))} lines/s`,
  );
  const seconds = (ms / 1000) * (100_000 / file.length);
  process.stdout.write(
    `at this rate 100,000 lines take ${seconds.toFixed(1)} s: ${seconds <= 60 ? "ok" : "MISSED"} (target 60 s)\n`,
  );
  process.stdout.write(`${cpu.replace("per request", "per line")}\n`);
  process.stdout.write(
    `probe authorizations meanwhile: ${latencies.length}, p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${at(1)} ms\n`,
  );
  const counts = ["matched", "force_posts", "returns", "duplicates", "refused"].map((k) => report[k]?.count);
  process.stdout.write(
    `report: matched ${counts[0]}, force posts ${counts[1]}, returns ${counts[2]}, duplicates ${counts[3]}, refused ${counts[4]}\n`,
  );
  assert.deepEqual(counts, [
    holds.length,
    Math.ceil((file.length - holds.length) / 2),
    Math.floor((file.length - holds.length) / 2),
    0,
    0,
  ]);
  const [posted] = await pgs.sql<{ n: string }>(
    database,
    "select count(*)::text as n from card_network_messages where file_id = $1",
    [fileId],
  );
  assert.equal(Number(posted?.n), file.length, "each line is recorded once");
  const again = await signed<Record<string, unknown>>(
    server.url,
    "/v1/rails/cards/clearing_files",
    undefined,
    ndjson,
  );
  assert.deepEqual(again.data, report, "a repeat answers the same report");
  process.stdout.write(`repeat of the file answered in ${(again.ms / 1000).toFixed(1)} s\n`);
}

async function main(): Promise<void> {
  step("build");
  execFileSync("npm", ["run", "build", "--silent"], { stdio: "inherit" });
  await pgs.create(database);
  countPostgresOf(await pgs.serverProcessPid());
  try {
    const env = emisorEnv({ DATABASE_URL: pgs.urlOf(database), EMISOR_CARD_NETWORK_SECRET: secret });
    const server = await ServerProcess.emisor(env);
    try {
      const { cards, holds } = await seedHolds(server.url, env);
      await pgs.sql(database, "vacuum analyze");
      await upload(server, cards, holds);
      await checkBooks(pgs, database, "0", new Map(), undefined);
      step("books balanced");
    } finally {
      await server.stop();
    }
  } finally {
    await pgs.drop(database);
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
