import { systemAccounts } from "../../src/ledger/accounts.ts";
import { readSpeiJournal, type SpeiJournalRecord } from "../../src/rails/spei/simulator.ts";
import type { Answer, Session, Signer } from "./client.ts";

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
  kind: "payment" | "subclient" | "incoming" | "transfer" | "return" | "airtime" | "unload" | "pot" | "card";
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
  /** A card network message's id, known before it is sent (a sandbox expiry's is in its answer). */
  messageId?: string;
  /** Signs each attempt (the card network's messages). */
  sign?: Signer;
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
    // Returns of orders and card messages have no marker of their own: checked elsewhere.
    if (op.kind === "return" || op.kind === "card") continue;
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

  await checkMoney(books, database, ops, expected, check);

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

/**
 * Money in minus money out equals what clients and cards hold, in integer centavos: money out
 * includes what card purchases paid the network (clearings less returns), what cards hold
 * includes their pending holds, less what they owe.
 */
async function checkMoney(
  books: Books,
  database: string,
  ops: OpRecord[],
  expected: { fundedCents: bigint },
  check: Check,
): Promise<void> {
  const [money] = await books.sql<Record<string, string>>(
    database,
    `select (select coalesce(sum(balance_cents), 0) from ledger_accounts where kind in ('CLIENT_MAIN', 'CARD', 'CARD_OWED'))::text as held,
            (select coalesce(sum(balance_cents), 0) from ledger_accounts where code like 'CARD_HOLDS%')::text as card_holds,
            (select coalesce(sum(balance_cents), 0) from ledger_accounts where code like 'CARD_NETWORK%')::text as card_network,
            (select -balance_cents from ledger_accounts where id = $1)::text as funded,
            (select coalesce(sum(monto_cents), 0) from transfer_operations)::text as spei_in,
            (select coalesce(sum(amount_cents + commission_cents + iva_cents), 0) from spei_orders
              where status in ('PENDIENTE', 'ENVIADA', 'LIQUIDADA'))::text as spei_out,
            (select coalesce(sum(amount_cents), 0) from airtime_topups where status <> 'FAILED')::text as airtime`,
    [systemAccounts.sandboxFunding],
  );
  const held = BigInt(money?.held ?? "0") + BigInt(money?.card_holds ?? "0");
  const moneyIn = BigInt(money?.funded ?? "0") + BigInt(money?.spei_in ?? "0");
  const moneyOut =
    BigInt(money?.spei_out ?? "0") + BigInt(money?.airtime ?? "0") + BigInt(money?.card_network ?? "0");
  check(
    held === moneyIn - moneyOut,
    `clients and cards hold ${held} (holds included, debts deducted), but in - out = ${moneyIn - moneyOut}`,
  );
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

/** JSON with its keys sorted: jsonb gives an object's keys back in its own order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object")
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`)
      .join(",")}}`;
  return JSON.stringify(value);
}

interface CardAnswer {
  message_id: string;
  type: string;
  result: string;
  decline_reason: string | null;
  amount: number;
  partial: boolean;
  over_tolerance: boolean;
  balance: { available: number; held: number; owed: number } | null;
}

export interface CardReport {
  violations: Violations;
  checks: number;
  /** Messages the workers sent, by type and result ("CLEARING POSTED"). */
  outcomes: Map<string, number>;
  partial: number;
  overTolerance: number;
  owingCards: number;
  /** Authorizations by what the client's endpoint made of them (decision status). */
  decisions: Map<string, number>;
  /** Declined authorizations by reason. */
  declines: Map<string, number>;
}

/** The controls every card of the run has in scope (purchases.ts). */
export interface RunControls {
  maxAmountPesos: number;
  dailyCount: number;
}

/**
 * Card purchases after the run. Exactly once: each message answered 2xx is one row of
 * card_network_messages whose stored answer is the answer the client saw, a refused one is no row,
 * each message wrote at most one entry and every purchase entry is some message's. No approval
 * beyond what the card could spend: each decision agrees with the balance it answered, and no
 * authorization's hold was posted to what a card owes. Money: CARD_HOLDS is what pending
 * authorizations hold, never negative; no card is owed; what the network was paid is what the
 * clients were told cleared, less returns; each authorization's held and cleared amounts are what
 * the entries naming it moved.
 */
export async function checkCardPurchases(
  books: Books,
  database: string,
  ops: OpRecord[],
  controls: RunControls,
): Promise<CardReport> {
  const report: CardReport = {
    violations: [],
    checks: 0,
    outcomes: new Map(),
    partial: 0,
    overTolerance: 0,
    owingCards: 0,
    decisions: new Map(),
    declines: new Map(),
  };
  const check = (ok: boolean, message: string) => {
    report.checks += 1;
    if (!ok) report.violations.push(message);
  };
  const networkSeen = await checkCardAnswers(books, database, ops, report, check);
  await checkCardDecisions(books, database, report, check);
  await checkCardControls(books, database, controls, report, check);
  await checkCardMoney(books, database, networkSeen, report, check);
  return report;
}

type Check = (ok: boolean, message: string) => void;

/** Each answer against its stored row; returns what the answers say the network was paid. */
async function checkCardAnswers(
  books: Books,
  database: string,
  ops: OpRecord[],
  report: CardReport,
  check: Check,
): Promise<bigint> {
  const rows = await books.sql<{ message_id: string; response: string }>(
    database,
    "select message_id, response::text as response from card_network_messages",
  );
  const stored = new Map(rows.map((row) => [row.message_id, row.response]));
  let network = 0n;
  for (const op of ops) {
    if (op.kind !== "card") continue;
    if (!op.answer) {
      report.violations.push(`card message ${op.key} was never answered`);
      continue;
    }
    const data = op.answer.body.data as CardAnswer | null;
    const id = op.messageId ?? data?.message_id ?? "";
    const row = stored.get(id);
    if (op.answer.status >= 300) {
      check(row === undefined, `card message ${id} answered ${op.answer.status} but is stored`);
      continue;
    }
    if (!data) continue;
    const label = `${data.type} ${data.result}`;
    report.outcomes.set(label, (report.outcomes.get(label) ?? 0) + 1);
    check(row !== undefined, `card message ${id} answered ${op.answer.status} but is not stored`);
    if (row !== undefined)
      check(
        canonical(JSON.parse(row)) === canonical(data),
        `card message ${id}: the stored answer is not the one the client saw`,
      );
    if (data.result === "POSTED") {
      const sign = data.type === "RETURN" ? -1n : 1n;
      network += sign * BigInt(data.amount);
    }
    if (data.over_tolerance) report.overTolerance += 1;
  }
  // The one second entry an AUTHORIZATION may write: the release of what the client's decision
  // (or its stand-in) did not approve.
  const decisionRelease = `e.kind = 'CARD_HOLD_RELEASE' and exists (select 1 from card_network_messages m
      join card_authorizations a on a.id = m.authorization_id
      where m.message_id = e.metadata->>'message_id' and m.type = 'AUTHORIZATION' and m.entry_id <> e.id
        and a.decision in ('ANSWERED', 'STOOD_IN'))`;
  const [entries] = await books.sql<{ twice: number; strange: number; orphan: number }>(
    database,
    `select (select count(*) from (select metadata->>'message_id' from journal_entries e
              where kind like 'CARD_%' and metadata->>'message_id' is not null and not (${decisionRelease})
              group by 1 having count(*) > 1) d)::int as twice,
            (select count(*) from card_network_messages m join journal_entries e on e.id = m.entry_id
              where e.metadata->>'message_id' is distinct from m.message_id)::int as strange,
            (select count(*) from journal_entries e
              where e.kind in ('CARD_HOLD', 'CARD_HOLD_RELEASE', 'CARD_CLEARING', 'CARD_FORCE_POST', 'CARD_RETURN', 'CARD_RETURN_REVERSAL')
                and not exists (select 1 from card_network_messages m where m.entry_id = e.id)
                and not (${decisionRelease}))::int as orphan`,
  );
  check(entries?.twice === 0, `${entries?.twice} card message(s) wrote more than one entry`);
  check(entries?.strange === 0, `${entries?.strange} card message(s) name an entry of another message`);
  check(entries?.orphan === 0, `${entries?.orphan} purchase entr(ies) belong to no message`);
  return network;
}

/** Every AUTHORIZATION decided against the balance it answered, its hold never owed. */
async function checkCardDecisions(books: Books, database: string, report: CardReport, check: Check) {
  const decisions = await books.sql<{
    id: string;
    response: string;
    requested: string;
    partial_allowed: boolean;
    decision: string | null;
  }>(
    database,
    `select m.message_id as id, m.response::text as response, a.requested_cents::text as requested, a.partial_allowed,
            a.decision
       from card_network_messages m join card_authorizations a on a.id = m.authorization_id
      where m.type = 'AUTHORIZATION'`,
  );
  for (const row of decisions) {
    const answer = JSON.parse(row.response) as CardAnswer;
    const requested = Number(row.requested);
    const available = answer.balance?.available ?? -1;
    if (answer.result === "DECLINED") {
      const reason = answer.decline_reason ?? "";
      report.declines.set(reason, (report.declines.get(reason) ?? 0) + 1);
    }
    if (
      answer.result === "APPROVED" &&
      answer.partial &&
      (row.decision === "ANSWERED" || row.decision === "STOOD_IN")
    ) {
      // Approved less after the client was asked (by its answer, or the hold a stand-in kept): the
      // answer's balance is read when the decision is recorded, and money may have reached the
      // card since the hold was taken, so only partial approval's own rule is checked here.
      report.partial += 1;
      check(
        row.partial_allowed && answer.amount < requested,
        `authorization ${row.id}: the client approved ${answer.amount} of ${requested} in part without partial_allowed`,
      );
    } else if (answer.result === "APPROVED" && answer.partial) {
      report.partial += 1;
      check(
        row.partial_allowed && available === 0 && answer.amount < requested,
        `authorization ${row.id} approved ${answer.amount} of ${requested} in part, leaving ${available}`,
      );
    } else if (answer.result === "APPROVED")
      check(answer.amount === requested, `authorization ${row.id} approved ${answer.amount} of ${requested}`);
    else if (answer.decline_reason === "INSUFFICIENT_FUNDS")
      check(
        available < requested && (!row.partial_allowed || available === 0),
        `authorization ${row.id} of ${requested} declined with ${available} available`,
      );
  }
  const [owed] = await books.sql<{ n: number }>(
    database,
    `select count(*)::int as n from card_network_messages m join postings p on p.entry_id = m.entry_id
       join ledger_accounts l on l.id = p.account_id where m.type = 'AUTHORIZATION' and l.kind = 'CARD_OWED'`,
  );
  check(owed?.n === 0, `${owed?.n} authorization hold(s) posted to what a card owes`);
}

/**
 * The run's controls held, and each card's velocity count is what its authorizations spent: no
 * approval above the maximum, none at a casino, no card over its daily count at the end but by
 * what could not be refused (a force post, a clearing after its hold expired, each counted as
 * spending and posted even at the limit); the
 * lifetime figures of card_spending equal the sums over the card's authorizations; no decision is
 * left awaiting once every message was answered.
 */
async function checkCardControls(
  books: Books,
  database: string,
  controls: RunControls,
  report: CardReport,
  check: Check,
): Promise<void> {
  const [row] = await books.sql<Record<string, number>>(
    database,
    `with spent as (
       select card_id, case when status = 'DECLINED' then 0 else held_cents + cleared_cents end as cents
         from card_authorizations),
     per_card as (
       select card_id, sum(cents) as cents, count(*) filter (where cents > 0) as n from spent group by card_id)
     select
       (select count(*) from card_authorizations
         where status <> 'DECLINED' and authorization_code is not null and authorized_cents > ${controls.maxAmountPesos * 100})::int as above_max,
       (select count(*) from card_authorizations
         where status <> 'DECLINED' and authorization_code is not null and mcc = '7995')::int as at_casino,
       (select count(*) from card_spending s where s.day_count > ${controls.dailyCount} + (
         select count(*) from card_authorizations a
         where a.card_id = s.card_id and a.status <> 'DECLINED' and a.held_cents + a.cleared_cents > 0
           and (a.created_at at time zone 'America/Mexico_City')::date = (now() at time zone 'America/Mexico_City')::date
           and (a.force_post or exists (select 1 from card_network_messages m
             where m.authorization_id = a.id and m.type = 'AUTHORIZATION_EXPIRY'))))::int as over_daily,
       (select count(*) from per_card p left join card_spending s using (card_id)
         where p.cents <> coalesce(s.lifetime_cents, 0) or p.n <> coalesce(s.lifetime_count, 0))::int as miscounted,
       ((select count(*) from card_authorizations where decision = 'AWAITING')
         + (select count(*) from card_decisions_awaiting))::int as awaiting`,
  );
  check(row?.above_max === 0, `${row?.above_max} approval(s) above the maximum amount`);
  check(row?.at_casino === 0, `${row?.at_casino} approval(s) at a blocked MCC`);
  check(row?.over_daily === 0, `${row?.over_daily} card(s) over their daily count`);
  check(row?.miscounted === 0, `${row?.miscounted} card(s) whose spending differs from their authorizations`);
  check(row?.awaiting === 0, `${row?.awaiting} authorization(s) still awaiting the client's decision`);
  const statuses = await books.sql<{ status: string; n: number }>(
    database,
    `select coalesce(decision, 'NOT ASKED') as status, count(*)::int as n from card_authorizations
      where authorization_code is not null or status = 'DECLINED' group by 1`,
  );
  for (const { status, n } of statuses) report.decisions.set(status, n);
}

async function checkCardMoney(
  books: Books,
  database: string,
  networkSeen: bigint,
  report: CardReport,
  check: Check,
): Promise<void> {
  const [row] = await books.sql<Record<string, string | number>>(
    database,
    `select (select coalesce(sum(balance_cents), 0) from ledger_accounts where code like 'CARD_HOLDS%')::text as shards,
            (select coalesce(sum(held_cents), 0) from card_authorizations where status = 'PENDING')::text as pending,
            (select count(*) from ledger_accounts where code like 'CARD_HOLDS%' and balance_cents < 0)::int as negative_shards,
            (select count(*) from ledger_accounts where kind = 'CARD_OWED' and balance_cents > 0)::int as owed_positive,
            (select count(*) from ledger_accounts where kind = 'CARD_OWED' and balance_cents < 0)::int as owing,
            (select count(*) from card_authorizations
              where held_cents < 0 or (status <> 'PENDING' and held_cents <> 0))::int as bad_holds,
            (select coalesce(sum(balance_cents), 0) from ledger_accounts where code like 'CARD_NETWORK%')::text as network`,
  );
  report.owingCards = Number(row?.owing ?? 0);
  check(
    row?.shards === row?.pending,
    `CARD_HOLDS holds ${row?.shards}, pending authorizations ${row?.pending}`,
  );
  check(row?.negative_shards === 0, `${row?.negative_shards} CARD_HOLDS shard(s) negative`);
  check(row?.owed_positive === 0, `${row?.owed_positive} card(s) owed money by Emisor (CARD_OWED above 0)`);
  check(row?.bad_holds === 0, `${row?.bad_holds} authorization(s) holding what their status forbids`);
  check(
    BigInt(row?.network ?? "0") === networkSeen,
    `CARD_NETWORK holds ${row?.network}, but the answers posted ${networkSeen}`,
  );
  const [moved] = await books.sql<{ n: number; example: string | null }>(
    database,
    `with moved as (
       select (e.metadata->>'authorization_id')::uuid as id,
              coalesce(sum(p.amount_cents) filter (where l.code like 'CARD_HOLDS%'), 0) as held,
              coalesce(sum(p.amount_cents) filter (where l.code like 'CARD_NETWORK%'
                and e.kind in ('CARD_CLEARING', 'CARD_FORCE_POST')), 0) as cleared
         from journal_entries e join postings p on p.entry_id = e.id join ledger_accounts l on l.id = p.account_id
        where e.kind like 'CARD_%' and e.metadata->>'authorization_id' is not null group by 1)
     select count(*)::int as n, min(a.id::text) as example
       from card_authorizations a left join moved m on m.id = a.id
      where a.held_cents <> coalesce(m.held, 0) or a.cleared_cents <> coalesce(m.cleared, 0)`,
  );
  check(
    moved?.n === 0,
    `${moved?.n} authorization(s) whose held or cleared amount differs from their entries, e.g. ${moved?.example}`,
  );
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
