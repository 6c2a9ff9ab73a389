/**
 * CPU profile of one scenario, for finding where a figure goes:
 *   npm run build && node --import tsx bench/profile.ts [payment|keyed|ciphered|distinct|lookup|listing|transfer|authorization|/v1/any/get/path] [seconds] [connections]
 * (`ciphered` pays with RSA-OAEP card numbers made beforehand, one per card, as `npm run bench` does;
 * `distinct` has 64 sub-clients each paying its own 8 cards, one client per connection; `transfer`
 * sends transfers out with the PIN from 100 funded cards, with the SPEI workers on; `authorization`
 * sends the card processor's signed AUTHORIZATION messages over 200 funded cards; `decided` the same,
 * with a decision endpoint that approves at once.)
 * PGSS=1 prints the statements that took PostgreSQL's time (pg_stat_statements loaded and created in
 * `postgres`). NO_WORKERS=1 turns the background workers off; CARDS=n seeds n cards instead of 200. NO_PROF=1 runs without the profiler (its sampling inflates syscalls such as writev on this VM).
 * PERF=1 runs without it too, with JIT symbols written for Linux perf (`perf record -a -g -- sleep 5`
 * while it runs; `perf report --pid <server> --children --sort sym`).
 * DRAIN=1 (transfer): also waits for every order to settle, and prints the CPU per order from the
 * load's start to then, the workers' hand-overs and settlements included however far they lagged.
 * FILL=n (transfer): first seeds n more cards, pays each and authorizes over them for 5 s, so the
 * process holds the card memories the full run's process holds by its transfers.
 * (BENCH_STDERR=1 shows the server's stderr; BENCH_STDOUT=file keeps its stdout after the banner, as
 * `--trace-gc-nvp` in BENCH_NODE_FLAGS writes there.) Starts the production build with --cpu-prof on a fresh PostgreSQL database, seeds a tenant
 * with cards, loads it with 64 connections, stops it and prints the functions with the most self
 * time (the .cpuprofile is kept under .emisor/profiles for Chrome DevTools).
 */
import { mkdirSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { buildClabe } from "../src/domain/clabe.ts";
import {
  type CpuSnapshot,
  countPostgresOf,
  cpuSnapshot,
  describeCpu,
  describeThreads,
  threadSeconds,
} from "./lib/cpu.ts";
import {
  authorizationRequests,
  cardPayments,
  distinctPayerRequests,
  load,
  transferOutRequests,
} from "./lib/load.ts";
import { Postgres } from "./lib/pg.ts";
import * as seed from "./lib/seed.ts";
import {
  benchCardNetworkSecret,
  benchMasterKey,
  describeBatches,
  emisorEnv,
  ServerProcess,
} from "./lib/server.ts";

const scenario = process.argv[2] ?? "payment";
/** `decided`: authorizations with a decision endpoint that approves at once (bench/decider-server.ts). */
const authorizing = scenario === "authorization" || scenario === "decided";

async function startDecider(base: string, token: string): Promise<ServerProcess> {
  const endpoint = "/v1/clients/authorization_endpoint";
  const first = await seed.api<{ authorization_endpoint: { secret: string } }>(base, "PUT", endpoint, token, {
    url: "http://127.0.0.1:9/decide",
  });
  const decider = await ServerProcess.start(
    process.execPath,
    ["--import", "tsx", "bench/decider-server.ts"],
    { DECIDER_SECRET: first.authorization_endpoint.secret },
    /listening on (\S+)/,
  );
  await seed.api(base, "PUT", endpoint, token, { url: `${decider.url}/decide` });
  return decider;
}
const seconds = Number(process.argv[3] ?? 10);
const connections = Number(process.argv[4] ?? 64);
const pgs = new Postgres(process.env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/postgres");
const database = `emisor_profile_${Date.now()}`;
const dir = path.resolve(".emisor/profiles", `${scenario.replace(/\W+/g, "_")}-${Date.now()}`);
mkdirSync(dir, { recursive: true });

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount: number;
}

function summarize(file: string): void {
  const profile = JSON.parse(readFileSync(file, "utf8")) as { nodes: Node[] };
  const self = new Map<string, number>();
  let total = 0;
  for (const node of profile.nodes) {
    const { functionName, url, lineNumber } = node.callFrame;
    const where = url.replace(/^.*node_modules\//, "").replace(/^.*\/dist\//, "");
    const key = `${functionName || "(anonymous)"} ${where}:${lineNumber + 1}`;
    self.set(key, (self.get(key) ?? 0) + node.hitCount);
    total += node.hitCount;
  }
  const byPackage = new Map<string, number>();
  for (const [key, hits] of self) {
    const where = key.split(" ")[1] ?? "";
    const pkg = where.startsWith("src/") ? where.split(":")[0] : (where.split("/")[0] ?? where);
    byPackage.set(pkg ?? "?", (byPackage.get(pkg ?? "?") ?? 0) + hits);
  }
  const top = (map: Map<string, number>, n: number) =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, v]) => `  ${((v / total) * 100).toFixed(1).padStart(5)}%  ${k}`)
      .join("\n");
  process.stdout.write(
    `\nself time by function:\n${top(self, 40)}\n\nby file or package:\n${top(byPackage, 25)}\n`,
  );
}

/** Waits (up to a minute) for every order to settle; prints the CPU per order since `start`. */
async function describeDrained(start: CpuSnapshot, pid: number): Promise<void> {
  const count = async (where: string) =>
    Number(
      (await pgs.sql<{ n: string }>(database, `select count(*)::text as n from spei_orders ${where}`))[0]?.n,
    );
  const began = Date.now();
  while ((await count("where status in ('PENDIENTE', 'ENVIADA')")) > 0 && Date.now() - began < 60_000)
    await new Promise((resolve) => setTimeout(resolve, 200));
  const orders = await count("");
  const drained = cpuSnapshot(pid);
  process.stdout.write(
    `settled ${((Date.now() - began) / 1000).toFixed(1)} s after the load; from its start, ${describeCpu(start, drained, orders, 1).replace("per request", "per order")}\n`,
  );
}

/** Seconds the main thread spent paused for the collector so far, by kind (prom-client's histogram). */
async function gcSeconds(base: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const byKind = new Map<string, number>();
  for (const match of text.matchAll(/^emisor_nodejs_gc_duration_seconds_sum\{kind="(\w+)"\} (\S+)$/gm))
    byKind.set(match[1] ?? "?", Number(match[2]));
  return byKind;
}

function describeGc(before: Map<string, number>, after: Map<string, number>, requests: number): string {
  const parts = [...after].map(([kind, s]) => {
    const us = ((s - (before.get(kind) ?? 0)) * 1e6) / Math.max(requests, 1);
    return `${kind} ${us.toFixed(0)} us`;
  });
  return `collector pauses per request: ${parts.join(", ")}`;
}

/** The card memories of the full run by its transfers: many cards paid, then authorized over. */
async function fillMemories(base: string, root: seed.Client): Promise<void> {
  const cards = await seed.seedCards(base, root, Number(process.env.FILL), {});
  await seed.pool(cards, 8, (card) => seed.pay(base, root.token, card.id, 1_000));
  await load({
    url: `${base}/v1/rails/cards/messages`,
    method: "POST",
    connections: 64,
    warmupSeconds: 0,
    seconds: 5,
    request: authorizationRequests(
      cards.map((card) => card.id),
      benchCardNetworkSecret,
    ),
  });
}

async function main(): Promise<void> {
  await pgs.create(database);
  countPostgresOf(await pgs.serverProcessPid());
  const env = emisorEnv({
    DATABASE_URL: pgs.urlOf(database),
    ...(process.env.NO_WORKERS ? { EMISOR_WORKERS: "false" } : {}),
    // LOG_LEVEL=info: with the access log (one line per request), to weigh what it costs.
    ...(process.env.LOG_LEVEL ? { LOG_LEVEL: process.env.LOG_LEVEL } : {}),
  });
  const server = await ServerProcess.emisor(
    env,
    process.env.PERF
      ? ["--perf-basic-prof-only-functions"]
      : process.env.NO_PROF
        ? []
        : ["--cpu-prof", `--cpu-prof-dir=${dir}`],
  );
  try {
    const root = await seed.createTenantWithCli(env, server.url, "100000000.00");
    const cards = await seed.seedCards(server.url, root, Number(process.env.CARDS ?? 200), {});
    const numbers =
      scenario === "ciphered"
        ? await seed.cipheredPans(
            pgs,
            database,
            benchMasterKey,
            await seed.systemPublicKey(server.url, root.token),
            cards,
          )
        : cards.map((card) => card.id);
    let distinct: ReturnType<typeof distinctPayerRequests> | undefined;
    if (scenario === "distinct") {
      const clients = await seed.seedSubclients(server.url, root, 64, 100_000);
      const theirs = await seed.seedCards(server.url, root, 64 * 8, {
        forClients: clients.map((c) => c.clientId),
      });
      distinct = distinctPayerRequests(clients, theirs);
    }
    if (authorizing) await seed.pool(cards, 8, (card) => seed.pay(server.url, root.token, card.id, 1_000));
    const decider = scenario === "decided" ? await startDecider(server.url, root.token) : undefined;
    if (scenario === "transfer") {
      await seed.pool(cards.slice(0, 100), 8, (card) => seed.pay(server.url, root.token, card.id, 100_000));
      await seed.setPins(
        server.url,
        root.token,
        await seed.systemPublicKey(server.url, root.token),
        cards.slice(0, 100),
        "4821",
      );
    }
    if (scenario === "transfer" && process.env.FILL) await fillMemories(server.url, root);
    // `listing`: the first page of 50 of a collection CLABE's 20,000 incoming transfers.
    if (scenario === "listing") await seed.seedTransfers(pgs, database, root.clabe, 20_000, 30);
    let i = 0;
    const start = cpuSnapshot(server.pid);
    let before: CpuSnapshot | undefined;
    let gcBefore: Promise<Map<string, number>> | undefined;
    let threadsBefore = new Map<string, number>();
    const measureCpu = () => {
      before = cpuSnapshot(server.pid);
      gcBefore = gcSeconds(server.url);
      threadsBefore = threadSeconds(server.pid);
      if (process.env.PGSS) void pgs.resetStatements();
      server.metrics().catch(() => {}); // reading the metrics starts a new event-loop delay histogram
    };
    const result = await load(
      scenario.startsWith("/")
        ? {
            url: `${server.url}${scenario}`,
            connections,
            warmupSeconds: 1,
            seconds,
            headers: { authorization: `Bearer ${root.token}` },
            onMeasureStart: measureCpu,
          }
        : scenario === "listing"
          ? {
              url: `${server.url}/v1/transfer/clabe/collection/${root.clabe}/operations?init_date=2026-01-01&end_date=2026-12-31&per_page=50&page=1`,
              connections,
              warmupSeconds: 1,
              seconds,
              headers: { authorization: `Bearer ${root.token}` },
              onMeasureStart: measureCpu,
            }
          : scenario === "lookup"
            ? {
                url: `${server.url}/v1/cardholders`,
                connections,
                warmupSeconds: 1,
                seconds,
                headers: { authorization: `Bearer ${root.token}` },
                request: () => ({ path: `/v1/cardholders?id=${cards[i++ % cards.length]?.cardholderId}` }),
                onMeasureStart: measureCpu,
              }
            : authorizing
              ? {
                  url: `${server.url}/v1/rails/cards/messages`,
                  method: "POST",
                  connections,
                  warmupSeconds: 1,
                  seconds,
                  request: authorizationRequests(
                    cards.map((card) => card.id),
                    benchCardNetworkSecret,
                  ),
                  onMeasureStart: measureCpu,
                }
              : {
                  url: `${server.url}${scenario === "transfer" ? "/v1/transfer/cards" : "/v1/cards/payment"}`,
                  method: "POST",
                  connections,
                  warmupSeconds: 1,
                  seconds,
                  headers: { authorization: `Bearer ${root.token}` },
                  // `keyed`: every payment with its own Idempotency-Key, as integrators send them.
                  request:
                    scenario === "transfer"
                      ? transferOutRequests(
                          cards.slice(0, 100).map((card) => card.id),
                          "4821",
                          buildClabe("012", "180", 123456n),
                        )
                      : (distinct ?? cardPayments(numbers, scenario === "keyed" ? "pay" : undefined)),
                  onMeasureStart: measureCpu,
                },
    );
    const after = cpuSnapshot(server.pid);
    const threadsAfter = threadSeconds(server.pid);
    const gcAfter = await gcSeconds(server.url);
    if (process.env.DRAIN && scenario === "transfer") await describeDrained(start, server.pid);
    if (process.env.PGSS) process.stdout.write(`\n${await pgs.describeStatements(result.measured)}\n`);
    const { batches, eventLoopP99Ms } = await server.metrics();
    process.stdout.write(
      `${describeBatches(batches)}; event-loop delay p99 ${eventLoopP99Ms.toFixed(1)} ms\n`,
    );
    if (before) process.stdout.write(`${describeCpu(before, after, result.measured, seconds)}\n`);
    if (gcBefore) process.stdout.write(`${describeGc(await gcBefore, gcAfter, result.measured)}\n`);
    process.stdout.write(
      `service threads per request: ${describeThreads(threadsBefore, threadsAfter, result.measured)}\n`,
    );
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const authorizationBatches = metrics
      .split("\n")
      .filter((line) => line.startsWith("emisor_authorization_batches_total{"))
      .join(", ");
    if (authorizationBatches) process.stdout.write(`authorization batches: ${authorizationBatches}\n`);
    const calls = (suffix: string) =>
      Number(
        new RegExp(`^emisor_authorization_decision_call_seconds_${suffix} (\\S+)$`, "m").exec(metrics)?.[1] ??
          0,
      );
    if (calls("count") > 0)
      process.stdout.write(
        `decision calls: ${calls("count")}, mean ${((calls("sum") / calls("count")) * 1000).toFixed(1)} ms\n`,
      );
    const gauge = (name: string) =>
      Math.round(Number(new RegExp(`^${name} (\\S+)$`, "m").exec(metrics)?.[1] ?? 0) / 2 ** 20);
    process.stdout.write(
      `peak RSS ${server.peakRssMb()} MB; now: heap ${gauge("emisor_nodejs_heap_size_used_bytes")}/${gauge("emisor_nodejs_heap_size_total_bytes")} MB, external ${gauge("emisor_nodejs_external_memory_bytes")} MB\n`,
    );
    process.stdout.write(
      `${scenario}: ${result.rps} req/s, p50 ${result.p50} ms, p99 ${result.p99} ms, non-2xx ${result.non2xx}\n`,
    );
    await decider?.stop();
  } finally {
    await server.stop();
    if (process.env.KEEP_DB) process.stdout.write(`kept database ${database}\n`);
    else await pgs.drop(database);
  }
  const file = readdirSync(dir).find((name) => name.endsWith(".cpuprofile"));
  if (file) summarize(path.join(dir, file));
  else process.stdout.write(`no profile written in ${dir}\n`);
}

await main();
