/**
 * `npm run test:chaos`: the bank test with faults. A private PostgreSQL cluster and the production
 * build of Emisor as its own process; 32 careful clients move money (payments to cards, funded
 * sub-clients, incoming SPEI, transfers out with settlements and forced returns, airtime) with
 * Idempotency-Keys, and act as the card processor (signed purchase messages retried by their
 * message_id: purchases.ts), while readers read balances; meanwhile Emisor is killed with SIGKILL and
 * PostgreSQL restarted in immediate mode, again and again, and clients drop their own
 * connections mid-request. Afterwards SQL proves the books and exactly-once (see checks.ts).
 *
 *   npm run test:chaos            full: >= 20 crash cycles and >= 10,000 retries (minutes)
 *   npm run test:chaos -- --ci    bounded: >= 30 s of load, at least one crash of each kind
 *   ... -- --pglite               on the embedded engine instead: Emisor runs on a data directory
 *                                 (the database inside its process), so the fault is SIGKILL of
 *                                 both; the books are checked between each kill and the restart
 *   ... -- --scale                three Emisor processes behind PgBouncer (transaction mode), the
 *                                 clients spreading over them; a fault kills one process
 *   ... -- --failover             three processes on a primary and its synchronous standby, named
 *                                 both in one DATABASE_URL; once under load the primary is lost
 *                                 and the standby promoted, and the processes follow it by themselves
 *
 * Prints the counts as its last lines; exits 1 on any violation.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import * as seed from "../../bench/lib/seed.ts";
import { buildClabe } from "../../src/domain/clabe.ts";
import type { Decider } from "../helpers/decider.ts";
import { subclientBody } from "../helpers/people.ts";
import {
  type Books,
  checkAfterRun,
  checkCardPurchases,
  checkEventFeeds,
  checkSnapshot,
  type OpRecord,
  type Violations,
} from "./checks.ts";
import { type Answer, CarefulClient, type Session } from "./client.ts";
import { freePort } from "./cluster.ts";
import { withEmbeddedBooks } from "./embedded.ts";
import { EmisorFleet, EmisorProcess } from "./emisor.ts";
import { PrivateBouncer } from "./pgbouncer.ts";
import { cardNetworkSecret, chaosControls, purchaseStory, setUpPurchaseRules } from "./purchases.ts";
import { type Shape, Topology } from "./topology.ts";

const ci = process.argv.includes("--ci");
const embedded = process.argv.includes("--pglite");
const shape: Shape = process.argv.includes("--failover")
  ? "failover"
  : process.argv.includes("--scale")
    ? "bouncer"
    : "single";
const processes = shape === "single" ? 1 : 3;
const plan = ci
  ? { minSeconds: 35, maxSeconds: 120, cycles: 2, eachKind: 1, retries: 0, abort: 0.1, gapMs: [3000, 6000] }
  : {
      minSeconds: 180,
      maxSeconds: 900,
      cycles: 20,
      eachKind: 10,
      retries: 10_000,
      abort: 0.3,
      gapMs: [3000, 7000],
    };
const workers = 32;
const readers = 4;
const started = Date.now();
const say = (text: string) =>
  process.stdout.write(`[chaos ${((Date.now() - started) / 1000).toFixed(0)}s] ${text}\n`);

interface Tenant {
  name: string;
  session: Session;
  clabe: string;
  clientId: string;
  /** A sub-client made at seeding that transfers between clients fund and sweep. */
  potId: string;
  cards: string[];
  orders: string[];
}

type Kind = OpRecord["kind"];
const weights: Array<[Kind, number]> = [
  ["payment", 30],
  ["incoming", 20],
  ["transfer", 15],
  ["airtime", 10],
  ["subclient", 8],
  ["unload", 6],
  ["pot", 6],
  ["return", 5],
  // A purchase story: two to four messages of the card network.
  ["card", 15],
];
const tag = randomBytes(3).toString("hex").toUpperCase();
const beneficiaryClabe = buildClabe("012", "180", 123456n);
/**
 * What the sandbox funds: on PostgreSQL, the first start's tenant and the two created here with the
 * CLI; on the embedded engine, whose directory the CLI cannot open while the service runs, the
 * first start's tenant alone (the second tenant is its sub-client, funded by it).
 */
const tenantFundingPesos = 1_000_000;
const fundedTenants = embedded ? 1n : 3n;
const subTenantFundingPesos = 300_000;

const cents = (pesos: number) => BigInt(Math.round(pesos * 100));
const randomPesos = (min: number, max: number) => Math.round((min + Math.random() * (max - min)) * 100) / 100;
const pick = <T>(items: T[]): T | undefined => items[Math.floor(Math.random() * items.length)];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function pickKind(): Kind {
  const total = weights.reduce((sum, [, w]) => sum + w, 0);
  let roll = Math.random() * total;
  for (const [kind, weight] of weights) {
    roll -= weight;
    if (roll < 0) return kind;
  }
  return "payment";
}

let sequence = 0;
/** A new operation: its key, body and a marker stored with its effect (so SQL can count it). */
function newOp(kind: Kind, tenant: Tenant): OpRecord | undefined {
  sequence += 1;
  const marker = `CX${tag}${kind[0]?.toUpperCase()}${sequence}`;
  const key = `chaos-${tag}-${sequence}`;
  const base = { kind, key, marker, tenant: tenant.name, session: tenant.session, amountCents: 0n };
  const where = { latitude: 19.4, longitude: -99.1 };
  switch (kind) {
    case "payment": {
      const amount = randomPesos(10, 200);
      const card = pick(tenant.cards);
      if (!card) return undefined;
      const body = { card_number: card, amount, payment_description: marker, ...where };
      return { ...base, method: "POST", path: "/v1/cards/payment", body, amountCents: cents(amount) };
    }
    case "subclient": {
      const available = randomPesos(1, 20);
      const body = subclientBody({ name: marker, available, api_key_password: "chaos-password-123" });
      return { ...base, method: "POST", path: "/v1/clients", body, amountCents: cents(available) };
    }
    case "incoming": {
      const amount = randomPesos(100, 2000);
      const body = { clabe: tenant.clabe, amount, tracking_key: marker };
      return { ...base, method: "POST", path: "/v1/sandbox/spei/incoming", body, amountCents: cents(amount) };
    }
    case "transfer": {
      const amount = randomPesos(1, 30);
      const card = pick(tenant.cards);
      if (!card) return undefined;
      const body = {
        card_number: card,
        payment_concept: marker,
        beneficiary_account: beneficiaryClabe,
        beneficiary_institution: "40012",
        amount,
        beneficiary_name: "Maria Lopez",
        numeric_reference: "1234567",
        beneficiary_rfc_curp: "ND",
        beneficiary_email: "maria@example.mx",
        pin: "4821",
      };
      return { ...base, method: "POST", path: "/v1/transfer/cards", body, amountCents: cents(amount) };
    }
    case "return": {
      const order = pick(tenant.orders);
      if (!order) return undefined;
      return {
        ...base,
        marker: order,
        method: "POST",
        path: `/v1/sandbox/spei/orders/${order}/return`,
        body: {},
      };
    }
    case "unload": {
      const amount = randomPesos(1, 20);
      const card = pick(tenant.cards);
      if (!card) return undefined;
      const body = { card_number: card, amount, description: marker };
      return { ...base, method: "POST", path: "/v1/cards/unload", body, amountCents: cents(amount) };
    }
    case "pot": {
      // Down to the pot or back up, at random: either side may lack the money (5105).
      const amount = randomPesos(1, 50);
      const [from, to] =
        Math.random() < 0.5 ? [tenant.clientId, tenant.potId] : [tenant.potId, tenant.clientId];
      const body = { from_client_id: from, to_client_id: to, amount, description: marker };
      return { ...base, method: "POST", path: "/v1/clients/transfers", body, amountCents: cents(amount) };
    }
    case "airtime": {
      const body = {
        product_id: "TELCEL_50",
        phone_number: "5512345678",
        email: "cliente@example.mx",
        external_id: marker,
      };
      return { ...base, method: "POST", path: "/v1/airtime/topup", body, amountCents: 5000n };
    }
  }
}

let emisor: EmisorFleet | undefined;
let deciders: Decider[] = [];

async function main(): Promise<number> {
  const violations: Violations = [];
  const work = mkdtempSync(path.join(tmpdir(), "emisor-chaos-"));
  if (embedded && shape !== "single") throw new Error("--scale and --failover need PostgreSQL, not --pglite");
  if (shape === "bouncer" && !PrivateBouncer.available())
    throw new Error("--scale needs pgbouncer (apt-get install pgbouncer; .ci/run installs it)");
  const where = {
    single: "PostgreSQL",
    bouncer: "PostgreSQL behind PgBouncer",
    failover: "a primary and a synchronous standby",
  };
  say(
    `${ci ? "CI" : "full"} run on ${embedded ? "the embedded engine (PGlite)" : where[shape]}, ${processes} Emisor process(es); files in ${work}`,
  );
  say("build");
  execFileSync("npm", ["run", "build", "--silent"], { stdio: "inherit" });
  if (!embedded) say("private PostgreSQL cluster");
  const database = "emisor";
  const cluster = embedded ? undefined : await Topology.create(shape, database);
  // Interrupted (Ctrl-C, a CI timeout): the private cluster and Emisor must not outlive the test.
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      void emisor
        ?.kill()
        .catch(() => {})
        .then(() => cluster?.destroy())
        .finally(() => process.exit(130));
    });
  }
  const dataDir = path.join(work, "data");
  /**
   * The books: the current primary's at any time (after a failover, the promoted standby's); the
   * embedded directory's only while Emisor is stopped.
   */
  const readBooks = <T>(use: (books: Books) => Promise<T>): Promise<T> =>
    cluster ? use(cluster.books) : withEmbeddedBooks(dataDir, use);
  const ports = await Promise.all(Array.from({ length: processes }, () => freePort()));
  const bases = ports.map((port) => `http://127.0.0.1:${port}`);
  const base = bases[0] ?? "";
  const journal = path.join(work, "spei-simulator.jsonl");
  const env = {
    ...(cluster
      ? { ...cluster.emisorEnv(), EMISOR_DB_QUERY_TIMEOUT_MS: "5000" }
      : { DATABASE_URL: "", EMISOR_DATA_DIR: dataDir }),
    PORT: String(ports[0]),
    EMISOR_MASTER_KEY: randomBytes(32).toString("hex"),
    EMISOR_SPEI_WEBHOOK_SECRET: "chaos-rail-secret",
    EMISOR_CARD_NETWORK_SECRET: cardNetworkSecret,
    EMISOR_SIM_SPEI_SETTLE_MS: "300",
    EMISOR_SIM_SPEI_RETURN_PROBABILITY: "0.2",
    EMISOR_SIM_SPEI_JOURNAL: journal,
    EMISOR_SIM_AIRTIME_DELAY_MS: "50",
    EMISOR_SIM_AIRTIME_FAILURE_PROBABILITY: "0.1",
    EMISOR_RATE_LIMIT_PER_SECOND: "0",
    LOG_LEVEL: process.env.CHAOS_LOG_LEVEL || "warn",
  };
  emisor = new EmisorFleet(
    ports.map(
      (port, i) =>
        new EmisorProcess(
          { ...env, PORT: String(port) },
          path.join(work, processes > 1 ? `emisor-${i}.log` : "emisor.log"),
        ),
    ),
    bases,
  );
  const crashes = { emisorKilled: 0, postgresRestarted: 0 };
  const counts = { reads: 0, readFailures: 0, snapshots: 0, snapshotsSkipped: 0, eventPolls: 0 };
  const client = new CarefulClient(bases, { abortProbability: plan.abort, attemptTimeoutMs: 15_000 });
  const ops: OpRecord[] = [];
  try {
    await emisor.start();
    say(
      `seed: tenants (${embedded ? "the first start's and its sub-client" : "CLI"}), cards with PINs, through the API`,
    );
    const tenants = embedded ? await seedEmbedded(base, emisor.banner) : await seedServer(env, base);
    say("seed: spending controls on every tenant, decision endpoints that are sometimes slow or down");
    deciders = await setUpPurchaseRules(base, tenants, embedded ? 1 : 2);

    let loadOver = false;
    let giveUpAt = Number.POSITIVE_INFINITY;
    const worker = async () => {
      while (!loadOver) {
        const tenant = pick(tenants);
        if (!tenant) continue;
        const kind = pickKind();
        if (kind === "card") {
          // A purchase is a story of several messages, each its own operation (purchases.ts).
          const record = (op: OpRecord) => ops.push(op);
          await purchaseStory({ client, tag, tenant, record, giveUpAt: () => giveUpAt });
          continue;
        }
        const op = newOp(kind, tenant);
        if (!op) continue;
        ops.push(op);
        op.answer = await client.send(op.method, op.path, op.session, op.body, op.key, giveUpAt);
        if (op.kind === "transfer" && op.answer?.status === 200) {
          const id = (op.answer.body.data as { transfer?: { id?: string } }).transfer?.id;
          if (id) tenant.orders.push(id);
        }
      }
    };
    const reader = async () => {
      while (!loadOver) {
        const tenant = pick(tenants);
        if (!tenant) break;
        const answer = await client.attempt(
          "GET",
          "/v1/clients/balance",
          tenant.session.token,
          undefined,
          undefined,
          false,
        );
        counts.reads += 1;
        if (answer?.status === 200) {
          const available = (answer.body.data as { balance: { available: number } }).balance.available;
          if (!(available >= 0))
            violations.push(`a reader saw tenant ${tenant.name}'s balance at ${available}`);
        } else {
          counts.readFailures += 1;
          if (answer?.status === 401)
            tenant.session.token = await tenant.session.login().catch(() => tenant.session.token);
          await sleep(100);
        }
      }
    };
    const snapshots = async () => {
      while (!loadOver) {
        await sleep(2000);
        const outcome = await readBooks((books) => checkSnapshot(books, database)).catch(() => undefined);
        if (!outcome) counts.snapshotsSkipped += 1;
        else {
          counts.snapshots += 1;
          violations.push(...outcome);
        }
      }
    };

    // Event pollers: each tenant's GET /v1/events walked by cursor, as an integration would,
    // through the load and the faults; afterwards every event of the subtree must have been seen
    // exactly once (checkEventFeeds).
    const feeds = tenants.map((tenant) => ({ tenant, cursor: null as string | null, seen: [] as string[] }));
    const pollEvents = async (feed: (typeof feeds)[number], until: () => boolean) => {
      while (!until()) {
        const query = `?limit=100${feed.cursor === null ? "" : `&after=${feed.cursor}`}`;
        const answer = await client.attempt(
          "GET",
          `/v1/events${query}`,
          feed.tenant.session.token,
          undefined,
          undefined,
          false,
        );
        counts.eventPolls += 1;
        if (answer?.status === 200) {
          const page = answer.body.data as {
            events: { id: string }[];
            has_more: boolean;
            next_cursor: string | null;
          };
          feed.seen.push(...page.events.map((e) => e.id));
          feed.cursor = page.next_cursor;
          if (!page.has_more) await sleep(150);
        } else {
          if (answer?.status === 401)
            feed.tenant.session.token = await feed.tenant.session
              .login()
              .catch(() => feed.tenant.session.token);
          await sleep(100);
        }
      }
    };

    say(`load: ${workers} workers, ${readers} readers, ${feeds.length} event pollers; faults start`);
    const loadStarted = Date.now();
    const running = [
      ...Array.from({ length: workers }, worker),
      ...Array.from({ length: readers }, reader),
      ...feeds.map((feed) => pollEvents(feed, () => loadOver)),
      // The embedded directory cannot be opened while Emisor runs: checked after each kill instead.
      ...(embedded ? [] : [snapshots()]),
    ];
    let turn = 0;
    let restarting: Promise<void> | undefined;
    let failedOverAt = 0;
    const enough = () => {
      const seconds = (Date.now() - loadStarted) / 1000;
      if (seconds >= plan.maxSeconds) return true;
      return (
        seconds >= plan.minSeconds &&
        !cluster?.canFailOver &&
        // Load on the promoted standby too, not only up to the failover.
        Date.now() - failedOverAt >= 10_000 &&
        crashes.emisorKilled + crashes.postgresRestarted >= plan.cycles &&
        Math.min(crashes.emisorKilled, embedded ? plan.eachKind : crashes.postgresRestarted) >=
          plan.eachKind &&
        client.stats.retries >= plan.retries
      );
    };
    while (!enough()) {
      const [low, high] = plan.gapMs as [number, number];
      await sleep(low + Math.random() * (high - low));
      await restarting;
      restarting = undefined;
      await emisor.restartStopped();
      // Alternate, with a coin now and then, so neither kind starves.
      const killEmisor = turn % 2 === 0 ? Math.random() < 0.8 : Math.random() < 0.2;
      turn += 1;
      if (cluster?.canFailOver && crashes.emisorKilled + crashes.postgresRestarted >= 2) {
        say("failover: the primary is lost, the standby promoted");
        const ms = await cluster.failover();
        failedOverAt = Date.now();
        say(`failover: the standby took writes ${ms} ms after the primary was lost`);
      } else if (embedded) {
        await emisor.kill();
        crashes.emisorKilled += 1;
        // The directory as the next start finds it: recovered, balanced, exactly as answered.
        violations.push(...(await readBooks((books) => checkSnapshot(books, database))));
        counts.snapshots += 1;
        await emisor.start();
      } else if (killEmisor) {
        // One process of the fleet (the only one in the original form): the others serve on.
        const victim = emisor.pick();
        await victim.kill();
        crashes.emisorKilled += 1;
        await sleep(Math.random() * 500);
        // With others serving, the restart overlaps the next gap (a start takes seconds on a
        // loaded machine); it is awaited before the next fault.
        const starting = victim.start();
        if (processes === 1) await starting;
        else restarting = starting;
      } else {
        await cluster?.restartPrimary();
        crashes.postgresRestarted += 1;
      }
      if (!restarting) await emisor.restartStopped();
      say(
        `crashes: Emisor ${crashes.emisorKilled}${embedded ? "" : `, PostgreSQL ${crashes.postgresRestarted}`}; ops ${ops.length}, retries ${client.stats.retries}, dropped ${client.stats.aborted}`,
      );
    }
    await restarting;
    await emisor.restartStopped();
    say("faults over; every operation retried until answered");
    loadOver = true;
    giveUpAt = Date.now() + 180_000;
    await Promise.all(running);
    const loadSeconds = Math.round((Date.now() - loadStarted) / 1000);

    say("quiesce: rails settle, pending top-ups recover");
    await waitQuiet(
      embedded
        ? () => inFlightByApi(client, tenants, ops)
        : () =>
            readBooks((books) =>
              books.sql<{ n: number }>(
                database,
                `select (select count(*) from spei_orders where status in ('PENDIENTE', 'ENVIADA'))::int
                      + (select count(*) from airtime_topups where status = 'PENDING')::int as n`,
              ),
            ).then(([row]) => row?.n ?? -1),
      180_000,
      violations,
    );
    const sample = ops
      .filter((op) => op.answer && op.answer.status < 300 && op.kind !== "airtime")
      .slice(-300);
    const replays = await Promise.all(sample.map((op) => replay(client, op)));
    // The pollers catch up: two polls in a row with nothing new, once everything is quiet.
    await Promise.all(
      feeds.map(async (feed) => {
        let quiet = 0;
        let seen = feed.seen.length;
        await pollEvents(feed, () => {
          if (feed.seen.length === seen) quiet += 1;
          else [quiet, seen] = [0, feed.seen.length];
          return quiet > 2;
        });
      }),
    );
    const terminating = Date.now();
    const exitCodes = await emisor.terminate();
    say(`SIGTERM: exit code(s) ${exitCodes.join(", ")} after ${Date.now() - terminating} ms`);
    if (exitCodes.some((code) => code !== 0))
      violations.push(`SIGTERM at the end: exit code(s) ${exitCodes.join(", ")}`);
    if (emisor.unexpectedExits > 0)
      violations.push(`Emisor exited by itself ${emisor.unexpectedExits} time(s)`);
    for (const [op, result] of replays)
      if (result) violations.push(`replay of ${op.kind} ${op.key}: ${result}`);

    say("checks");
    const report = await readBooks((books) =>
      checkAfterRun(books, database, ops, journal, {
        fundedCents: cents(tenantFundingPesos) * fundedTenants,
      }),
    );
    violations.push(...report.violations);
    const feedReport = await readBooks((books) =>
      checkEventFeeds(
        books,
        database,
        feeds.map((feed) => ({ clientId: feed.tenant.clientId, name: feed.tenant.name, seen: feed.seen })),
      ),
    );
    violations.push(...feedReport.violations);
    const cards = await readBooks((books) => checkCardPurchases(books, database, ops, chaosControls));
    violations.push(...cards.violations);
    const byKind = new Map<string, { ok: number; rejected: number; unanswered: number }>();
    const rejections = new Map<string, number>();
    for (const op of ops) {
      const row = byKind.get(op.kind) ?? { ok: 0, rejected: 0, unanswered: 0 };
      if (!op.answer) row.unanswered += 1;
      else if (op.answer.status < 300) row.ok += 1;
      else {
        row.rejected += 1;
        const reason = `${op.kind} ${op.answer.body.code}`;
        rejections.set(reason, (rejections.get(reason) ?? 0) + 1);
      }
      byKind.set(op.kind, row);
    }
    const lines = [
      "",
      `== bank test with faults (${ci ? "CI form" : "full"}${shape === "single" ? "" : `, ${shape === "bouncer" ? "three processes behind PgBouncer" : "three processes, failover"}`}), ${violations.length === 0 ? "PASSED" : "FAILED"}`,
      ...violations.slice(0, 50).map((v) => `VIOLATION: ${v}`),
      `load: ${loadSeconds} s under faults, ${Math.round((Date.now() - started) / 1000)} s in all; ${workers} workers, ${readers} readers`,
      `operations: ${ops.length} (${[...byKind].map(([k, r]) => `${k} ${r.ok} ok/${r.rejected} 4xx/${r.unanswered} unanswered`).join(", ")})`,
      `4xx answers by code (expected business refusals: insufficient balance, order already final): ${[...rejections].map(([r, n]) => `${r} x${n}`).join(", ") || "none"}`,
      `requests: ${client.stats.requests}; retries: ${client.stats.retries} (dropped by the client mid-request ${client.stats.aborted}, network errors ${client.stats.networkErrors}, 5xx ${client.stats.status5xx}, re-logins ${client.stats.reLogins})`,
      `reads: ${counts.reads - counts.readFailures} answered 200 (${counts.readFailures} more attempts unanswered or non-200 while a crash was under way); replays checked: ${sample.length}`,
      embedded
        ? `crashes survived: Emisor with its embedded engine SIGKILL ${crashes.emisorKilled}`
        : `crashes survived: Emisor SIGKILL ${crashes.emisorKilled}${processes > 1 ? ` (one of ${processes} processes each time)` : ""}, PostgreSQL immediate restart ${crashes.postgresRestarted}${cluster?.shape === "failover" ? `, failover to the standby ${cluster.failovers}` : ""}`,
      `event feeds: ${feeds.length} pollers walked GET /v1/events by cursor (${counts.eventPolls} polls) and saw ${feedReport.seen} events of ${feedReport.stored} stored in their subtrees; missed ${feedReport.missed}, seen twice ${feedReport.duplicated}`,
      `card messages: ${[...cards.outcomes].map(([outcome, n]) => `${outcome} ${n}`).join(", ")}; partial approvals ${cards.partial}, clearings over tolerance ${cards.overTolerance}, cards owing at the end ${cards.owingCards}; ${cards.checks} checks`,
      `authorizations: declined by reason ${[...cards.declines].map(([reason, n]) => `${reason} ${n}`).join(", ") || "none"}; the client's decision ${[...cards.decisions].map(([status, n]) => `${status} ${n}`).join(", ")}`,
      `SPEI: ${report.speiOrders} orders, ${report.speiResent} re-sent to the rail (deduplicated), ${report.speiForcedReturns} forced returns`,
      embedded
        ? `invariants: the books checked after each of the ${counts.snapshots} kills, before the restart; ${report.checks} checks after the run; violations: ${violations.length}`
        : `invariants: ${counts.snapshots} snapshots during the run (${counts.snapshotsSkipped} skipped: database away), ${report.checks} checks after it; violations: ${violations.length}`,
    ];
    process.stdout.write(`${lines.join("\n")}\n`);
    return violations.length === 0 ? 0 : 1;
  } finally {
    await emisor.kill().catch(() => {});
    emisor.close();
    for (const decider of deciders) await decider.close();
    await cluster?.destroy();
    if (violations.length === 0) rmSync(work, { recursive: true, force: true });
    else process.stdout.write(`logs kept in ${work}\n`);
  }
}

/** Waits until `inFlight` (transfers out in flight plus pending top-ups) counts none. */
async function waitQuiet(inFlight: () => Promise<number>, timeoutMs: number, violations: Violations) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const n = await inFlight().catch(() => -1);
    if (n === 0) return;
    if (Date.now() > deadline) {
      violations.push(`${n} transfers out or top-ups still in flight ${timeoutMs / 1000} s after the faults`);
      return;
    }
    await sleep(1000);
  }
}

/**
 * What is in flight, as an integrator sees it: the first tenant's transfers out still PENDIENTE or
 * ENVIADA (its listing covers the second tenant, its sub-client), and the top-ups answered
 * PENDING that still are. -1 while an answer is missing.
 */
async function inFlightByApi(client: CarefulClient, tenants: Tenant[], ops: OpRecord[]): Promise<number> {
  const [first] = tenants;
  if (!first) return 0;
  const orders = await client.attempt(
    "GET",
    "/v1/transfer/cards?status=PENDIENTE,ENVIADA&per_page=100",
    first.session.token,
    undefined,
    undefined,
    false,
  );
  if (orders?.status !== 200) return -1;
  let n = (orders.body.data as { transfers: unknown[] }).transfers.length;
  for (const op of ops) {
    const topup = (op.answer?.body.data as { topup?: { id: string; status: string } } | undefined)?.topup;
    if (op.kind !== "airtime" || topup?.status !== "PENDING") continue;
    const now = await client.attempt(
      "GET",
      `/v1/airtime/topups/${topup.id}`,
      op.session.token,
      undefined,
      undefined,
      false,
    );
    if (now?.status !== 200) return -1;
    if ((now.body.data as { topup: { status: string } }).topup.status === "PENDING") n += 1;
  }
  return n;
}

/** Two tenants of their own, created with the CLI against the same database (PostgreSQL). */
async function seedServer(env: Record<string, string>, base: string): Promise<Tenant[]> {
  const tenants: Tenant[] = [];
  for (const name of ["A", "B"]) {
    const created = await seed.createTenantWithCli(env, base, `${tenantFundingPesos}.00`);
    tenants.push(await withCards(name, base, created, created.clabe));
  }
  return tenants;
}

/** The first start's sandbox tenant (from the banner) and a funded sub-client of it. */
async function seedEmbedded(base: string, banner: string): Promise<Tenant[]> {
  const found = /api_key: +(\S+)\n +password: +(\S+)\n +collection CLABE: +(\d{18})/.exec(banner);
  if (!found?.[1] || !found[2] || !found[3]) throw new Error(`no sandbox tenant in the banner:\n${banner}`);
  const [, apiKey, password, clabe] = found;
  const first = { clientId: "", apiKey, password, token: await seed.login(base, apiKey, password) };
  const [sub] = await seed.seedSubclients(base, first, 1, subTenantFundingPesos);
  if (!sub) throw new Error("no sub-client");
  return [
    await withCards("A", base, first, clabe),
    await withCards("B", base, sub, await seed.collectionClabe(base, sub.token)),
  ];
}

/**
 * A tenant of the test: 12 active cards with PIN 4821, on a product with a transfer commission, and
 * a sub-client (the pot) funded with 1,000.00 that transfers between clients fund and sweep.
 */
async function withCards(name: string, base: string, client: seed.Client, clabe: string): Promise<Tenant> {
  const session: Session = {
    token: client.token,
    login: () => seed.login(base, client.apiKey, client.password),
  };
  const cards = await seed.seedCards(base, client, 12, { commission: 5 });
  await seed.setPins(base, client.token, await seed.systemPublicKey(base, client.token), cards, "4821");
  const [pot] = await seed.seedSubclients(base, client, 1, 1000);
  if (!pot) throw new Error("no pot sub-client");
  const clientId = client.clientId || (await seed.ownClientId(base, client.token));
  return { name, session, clabe, clientId, potId: pot.clientId, cards: cards.map((c) => c.id), orders: [] };
}

/**
 * The same key and body again (a card network message: the same message_id, signed afresh): the
 * stored answer, marked replayed, and no new effect.
 */
async function replay(client: CarefulClient, op: OpRecord): Promise<[OpRecord, string | undefined]> {
  const again: Answer | undefined = op.sign
    ? await client.send(op.method, op.path, undefined, op.body, undefined, Date.now() + 60_000, op.sign)
    : await client.send(op.method, op.path, op.session, op.body, op.key, Date.now() + 60_000);
  if (!again) return [op, "no answer"];
  if (!again.replayed) return [op, `not marked replayed (status ${again.status})`];
  if (JSON.stringify(again.body) !== JSON.stringify(op.answer?.body))
    return [op, "another body than the first answer"];
  return [op, undefined];
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `chaos: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(1);
  },
);
