import { systemAccounts } from "../../src/ledger/accounts.ts";
import { readSpeiJournal, type SpeiJournalRecord } from "../../src/rails/spei/simulator.ts";
import type { Answer, Session } from "./client.ts";

/**
 * What the bank test proves with SQL against the database (and the SPEI simulator's journal),
 * during the run (one snapshot per statement) and after it.
 */
export type Violations = string[];

/**
 * SQL on the service's database: the PostgreSQL server (bench/lib/pg.ts's Postgres), or the
 * embedded engine's data directory, opened while Emisor is stopped (embedded.ts).
 */
export interface Books {
  sql<T = Record<string, unknown>>(database: string, text: string, values?: unknown[]): Promise<T[]>;
}

export interface OpRecord {
  kind: "payment" | "subclient" | "incoming" | "transfer" | "return" | "airtime" | "unload" | "pot";
  key: string;
  /**
   * Stored with the operation's effect: payment or unload description, tracking key, concept, name,
   * external id, client transfer description; the order id of a return.
   */
  marker: string;
  tenant: string;
  session: Session;
  method: string;
  path: string;
  body: unknown;
  amountCents: bigint;
  /** The final answer; undefined when none came before the client gave up. */
  answer?: Answer | undefined;
}

/** The ledger at one instant (one statement is one snapshot): balanced, summing to zero, not overdrawn. */
export async function checkSnapshot(books: Books, database: string): Promise<Violations> {
  const [row] = await books.sql<{ total: string; negative: number; unbalanced: number; drift: number }>(
    database,
    `select (select coalesce(sum(balance_cents), 0) from ledger_accounts)::text as total,
            (select count(*) from ledger_accounts where not allow_negative and balance_cents < 0)::int as negative,
            (select count(*) from (select entry_id from postings group by entry_id having sum(amount_cents) <> 0) u)::int as unbalanced,
            (select count(*) from ledger_accounts a
              where a.balance_cents <> (select coalesce(sum(p.amount_cents), 0) from postings p where p.account_id = a.id))::int as drift`,
  );
  const found: Violations = [];
  if (row?.total !== "0") found.push(`snapshot: balances sum to ${row?.total}, not 0`);
  if (row?.negative) found.push(`snapshot: ${row.negative} protected balance(s) negative`);
  if (row?.unbalanced) found.push(`snapshot: ${row.unbalanced} journal entr(ies) not balanced`);
  if (row?.drift) found.push(`snapshot: ${row.drift} balance(s) differ from the sum of their postings`);
  return found;
}

export interface AfterRunReport {
  violations: Violations;
  checks: number;
  speiOrders: number;
  speiResent: number;
  speiForcedReturns: number;
}

/** Every check after the run; `fundedCents` is what the sandbox funded (tenant creation). */
export async function checkAfterRun(
  books: Books,
  database: string,
  ops: OpRecord[],
  journalPath: string,
  expected: { fundedCents: bigint },
): Promise<AfterRunReport> {
  const violations: Violations = [];
  let checks = 0;
  const check = (ok: boolean, message: string) => {
    checks += 1;
    if (!ok) violations.push(message);
  };

  // The books.
  for (const v of await checkSnapshot(books, database)) violations.push(v);
  checks += 4;

  // Exactly once: each operation's effect, found by its marker, exists once if it was answered
  // 2xx and never twice whatever happened (dropped, retried, crashed).
  const effects = await effectCounts(books, database);
  for (const op of ops) {
    if (op.kind === "return") continue;
    const found = effects.get(op.marker) ?? { all: 0, live: 0, cents: 0n };
    const ok2xx = op.answer !== undefined && op.answer.status < 300;
    check(found.live <= 1, `${op.kind} ${op.key} took effect ${found.live} times`);
    if (ok2xx)
      check(
        found.all >= 1 && (op.kind === "airtime" || found.live === 1),
        `${op.kind} ${op.key} answered ${op.answer?.status} but has no effect`,
      );
    if (op.answer && op.answer.status >= 400)
      check(
        found.live === 0,
        `${op.kind} ${op.key} answered ${op.answer.status} (code ${op.answer.body.code}) but took effect`,
      );
    if (found.live === 1 && op.kind !== "airtime")
      check(
        found.cents === op.amountCents,
        `${op.kind} ${op.key}: ${found.cents} centavos moved, asked ${op.amountCents}`,
      );
    if (!op.answer) violations.push(`${op.kind} ${op.key} was never answered`);
  }
  const [reversals] = await books.sql<{ n: number }>(
    database,
    "select count(*)::int as n from (select reverses_id from journal_entries where reverses_id is not null group by 1 having count(*) > 1) d",
  );
  check(reversals?.n === 0, `${reversals?.n} entries reversed more than once`);
  const [keys] = await books.sql<{ n: number }>(
    database,
    "select count(*)::int as n from (select api_key_id, key from idempotency_keys group by 1, 2 having count(*) > 1) d",
  );
  check(keys?.n === 0, `${keys?.n} idempotency keys stored twice`);

  // Money in minus money out equals what clients and cards hold, in integer centavos.
  const [money] = await books.sql<Record<string, string>>(
    database,
    `select (select coalesce(sum(balance_cents), 0) from ledger_accounts where kind in ('CLIENT_MAIN', 'CARD'))::text as held,
            (select -balance_cents from ledger_accounts where id = $1)::text as funded,
            (select coalesce(sum(monto_cents), 0) from transfer_operations)::text as spei_in,
            (select coalesce(sum(amount_cents + commission_cents + iva_cents), 0) from spei_orders
              where status in ('PENDIENTE', 'ENVIADA', 'LIQUIDADA'))::text as spei_out,
            (select coalesce(sum(amount_cents), 0) from airtime_topups where status <> 'FAILED')::text as airtime`,
    [systemAccounts.sandboxFunding],
  );
  const held = BigInt(money?.held ?? "0");
  const moneyIn = BigInt(money?.funded ?? "0") + BigInt(money?.spei_in ?? "0");
  const moneyOut = BigInt(money?.spei_out ?? "0") + BigInt(money?.airtime ?? "0");
  check(held === moneyIn - moneyOut, `clients and cards hold ${held}, but in - out = ${moneyIn - moneyOut}`);
  check(
    BigInt(money?.funded ?? "0") === expected.fundedCents,
    `sandbox funding ${money?.funded}, expected ${expected.fundedCents}`,
  );
  const incoming2xx = ops
    .filter((op) => op.kind === "incoming" && op.answer && op.answer.status < 300)
    .reduce((sum, op) => sum + op.amountCents, 0n);
  check(
    BigInt(money?.spei_in ?? "0") === incoming2xx,
    `incoming SPEI credited ${money?.spei_in}, clients were told ${incoming2xx}`,
  );

  // Outgoing SPEI against the rail's own record.
  const spei = await checkSpei(books, database, readSpeiJournal(journalPath));
  violations.push(...spei.violations);
  checks += spei.checks;
  return {
    violations,
    checks,
    speiOrders: spei.orders,
    speiResent: spei.resent,
    speiForcedReturns: spei.forced,
  };
}

async function effectCounts(
  books: Books,
  database: string,
): Promise<Map<string, { all: number; live: number; cents: bigint }>> {
  const rows = await books.sql<{ marker: string; all: number; live: number; cents: string }>(
    database,
    `select e.description as marker, count(*)::int as all, count(*)::int as live,
            coalesce(sum((select p.amount_cents from postings p where p.entry_id = e.id and p.amount_cents > 0 limit 1)), 0)::text as cents
       from journal_entries e where e.kind in ('CARD_PAYMENT', 'CARD_UNLOAD') and e.description like 'CX%' group by 1
     union all
     select clave_rastreo, count(*)::int, count(*)::int, sum(monto_cents)::text from transfer_operations where clave_rastreo like 'CX%' group by 1
     union all
     select payment_concept, count(*)::int, count(*)::int, sum(amount_cents)::text from spei_orders where payment_concept like 'CX%' group by 1
     union all
     select c.name, count(*)::int, count(*)::int, coalesce(sum(a.balance_cents), 0)::text from clients c
       left join ledger_accounts a on a.id = c.id and a.kind = 'CLIENT_MAIN'
      where c.name like 'CX%' group by 1
     union all
     select external_id, count(*)::int, (count(*) filter (where status <> 'FAILED'))::int, sum(amount_cents)::text
       from airtime_topups where external_id like 'CX%' group by 1
     union all
     select description, count(*)::int, count(*)::int, sum(amount_cents)::text
       from client_transfers where description like 'CX%' group by 1`,
  );
  return new Map(rows.map((r) => [r.marker, { all: r.all, live: r.live, cents: BigInt(r.cents) }]));
}

/**
 * No order lost or sent twice: every order Emisor handed over is one order at the rail (same
 * amount), every order the rail holds is one of Emisor's, an order Emisor calls settled was
 * settled by the rail, and nothing is still in flight.
 */
async function checkSpei(books: Books, database: string, journal: SpeiJournalRecord[]) {
  const violations: Violations = [];
  let checks = 0;
  const check = (ok: boolean, message: string) => {
    checks += 1;
    if (!ok) violations.push(message);
  };
  const accepted = new Map<string, Extract<SpeiJournalRecord, { e: "accepted" }>>();
  const submits = new Map<string, number>();
  const delivered = new Set<string>();
  for (const record of journal) {
    if (record.e === "submit") submits.set(record.key, (submits.get(record.key) ?? 0) + 1);
    if (record.e === "delivered") delivered.add(record.key);
    if (record.e === "accepted") {
      check(!accepted.has(record.key), `the rail accepted order ${record.key} twice`);
      accepted.set(record.key, record);
    }
  }
  const orders = await books.sql<{ key: string; status: string; cents: string; detail: string | null }>(
    database,
    `select to_char(operation_date, 'YYYY-MM-DD') || '|' || tracking_key as key, status, amount_cents::text as cents,
            state_detail as detail from spei_orders`,
  );
  const known = new Set<string>();
  let forced = 0;
  for (const order of orders) {
    check(!known.has(order.key), `two orders share the tracking key ${order.key}`);
    known.add(order.key);
    const atRail = accepted.get(order.key);
    const isForced = order.status === "DEVUELTA" && (order.detail ?? "").includes("forzada");
    if (isForced) forced += 1;
    check(
      order.status !== "PENDIENTE" && order.status !== "ENVIADA",
      `order ${order.key} still ${order.status}`,
    );
    if (atRail)
      check(
        atRail.amountCents === order.cents,
        `order ${order.key}: ${order.cents} at Emisor, ${atRail.amountCents} at the rail`,
      );
    if (order.status === "LIQUIDADA") {
      check(
        atRail?.decision.estado === "LIQUIDACION",
        `order ${order.key} LIQUIDADA but the rail ${atRail ? `decided ${atRail.decision.estado}` : "never took it"}`,
      );
      check(delivered.has(order.key), `order ${order.key} LIQUIDADA without the rail's callback`);
    }
    if (order.status === "DEVUELTA" && !isForced)
      check(
        atRail?.decision.estado === "DEVOLUCION",
        `order ${order.key} DEVUELTA but the rail ${atRail ? `decided ${atRail.decision.estado}` : "never took it"}`,
      );
    if (order.status === "CANCELADA") check(!atRail, `order ${order.key} CANCELADA but accepted by the rail`);
  }
  for (const key of accepted.keys())
    check(known.has(key), `the rail holds order ${key}, which Emisor does not know`);
  const resent = [...submits.values()].filter((n) => n > 1).length;
  return { violations, checks, orders: orders.length, resent, forced };
}

export interface EventFeed {
  clientId: string;
  name: string;
  /** Event ids in the order GET /v1/events gave them, walked by cursor. */
  seen: string[];
}

/**
 * Every event of each poller's subtree was listed to it exactly once, and nothing else was: a
 * cursor that an event committed later landed behind, or a repeated page, shows up here.
 */
export async function checkEventFeeds(
  books: Books,
  database: string,
  feeds: EventFeed[],
): Promise<{ violations: Violations; seen: number; stored: number; missed: number; duplicated: number }> {
  const violations: Violations = [];
  const totals = { seen: 0, stored: 0, missed: 0, duplicated: 0 };
  for (const feed of feeds) {
    const stored = await books.sql<{ id: string }>(
      database,
      `select e.id::text as id from events e join clients c on c.id = e.client_id where $1::uuid = any(c.lineage)`,
      [feed.clientId],
    );
    const storedIds = new Set(stored.map((row) => row.id));
    const seen = new Set<string>();
    let duplicated = 0;
    for (const id of feed.seen) {
      if (seen.has(id)) duplicated += 1;
      seen.add(id);
    }
    const missed = [...storedIds].filter((id) => !seen.has(id));
    const foreign = [...seen].filter((id) => !storedIds.has(id));
    if (missed.length > 0)
      violations.push(
        `tenant ${feed.name}'s event feed never listed ${missed.length} event(s), e.g. ${missed[0]}`,
      );
    if (duplicated > 0)
      violations.push(`tenant ${feed.name}'s event feed listed ${duplicated} event(s) twice`);
    if (foreign.length > 0)
      violations.push(
        `tenant ${feed.name}'s event feed listed ${foreign.length} event(s) outside its subtree`,
      );
    totals.seen += feed.seen.length;
    totals.stored += storedIds.size;
    totals.missed += missed.length;
    totals.duplicated += duplicated;
  }
  return { violations, ...totals };
}
