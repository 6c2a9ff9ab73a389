import { appendFileSync, closeSync, existsSync, openSync, readFileSync, readSync, statSync } from "node:fs";
import { keepLast } from "../recent.ts";
import {
  RailUnavailableError,
  type SpeiOrderMessage,
  type SpeiRail,
  type SpeiStateChange,
  type SpeiStateChangeHandler,
  type SubmitResult,
} from "./port.ts";

/**
 * The default SPEI adapter: an in-process stand-in for an STP-style participant. Like the real
 * rail it accepts an order at once and decides its fate later, asynchronously: after
 * `settleDelayMs` it calls back LIQUIDACION, or DEVOLUCION with a Banxico cause (with
 * `returnProbability`); with `unavailableProbability` a submission fails as if the rail were
 * down. It deduplicates by (operation date, tracking key), and redelivers a callback the handler
 * failed to apply, as a real rail retries its webhooks. After its last redelivery it stops retrying
 * but keeps the outcome: a re-send of that order (Emisor's settlement check) delivers it again, as
 * a real participant answers a status query; so does a re-send while a redelivery waits out its
 * backoff.
 *
 * Tests and the sandbox steer it deterministically: `decide` overrides the dice per order,
 * `hold()` queues outcomes until `flush()` delivers them.
 *
 * With `journalPath` it keeps its book in an append-only file (JSON lines), as a real rail keeps
 * its own: after a restart (of the whole process, even SIGKILL) it still knows every order it
 * accepted, answers a re-sent one as before instead of taking it anew, and delivers the outcomes
 * it had not delivered yet. The bank test with faults compares Emisor's orders with this file.
 * Several processes (each with its simulator) sharing one journal are one rail: before it
 * decides a submission, a simulator reads what the others appended, so an order re-sent through
 * another process after a crash is answered as the first time, never accepted twice.
 */
export interface SpeiSimulatorOptions {
  settleDelayMs: number;
  /** 0..1: share of accepted orders that are returned instead of settled. */
  returnProbability: number;
  /** 0..1: share of submissions that fail as if the rail were unreachable. */
  unavailableProbability: number;
  /** Causes a simulated return picks from (default 01, 02, 03, 17). */
  returnCauses?: string[];
  random?: () => number;
  /** Append-only journal file (created when missing); without it the simulator forgets on exit. */
  journalPath?: string | undefined;
}

/** One line of the journal. `submit` records every hand-over, duplicates included. */
export type SpeiJournalRecord =
  | { e: "submit"; key: string }
  | {
      e: "accepted";
      key: string;
      ref: string;
      trackingKey: string;
      operationDate: string;
      amountCents: string;
      decision: Exclude<SimulatedDecision, "UNAVAILABLE" | { reject: string }>;
    }
  | { e: "refused"; key: string; detail: string }
  | { e: "delivered"; key: string }
  | { e: "cancelled"; key: string };

/** Reads a journal file: every record in order (a torn last line, from a crash mid-write, is skipped). */
export function readSpeiJournal(path: string): SpeiJournalRecord[] {
  if (!existsSync(path)) return [];
  const records: SpeiJournalRecord[] = [];
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (!line) continue;
    try {
      records.push(JSON.parse(line) as SpeiJournalRecord);
    } catch {
      // Only the last line can be torn; it was never acknowledged to anyone.
    }
  }
  return records;
}

export type SimulatedDecision =
  | { estado: "LIQUIDACION" }
  | { estado: "DEVOLUCION"; causa: string; detalle?: string }
  | { estado: "CANCELACION"; detalle: string }
  /** Refuse the order at submission. */
  | { reject: string }
  /** Fail the submission as if the rail were unreachable (nothing is recorded). */
  | "UNAVAILABLE";

/** An outcome to deliver: only what its callback names, not the whole order. */
interface Pending {
  trackingKey: string;
  operationDate: string;
  decision: Exclude<SimulatedDecision, "UNAVAILABLE" | { reject: string }>;
  /** A redelivery's own timer; the settle delay's outcomes wait in the simulator's queue instead. */
  timer: NodeJS.Timeout | undefined;
  /** When it is due in the settle queue (a queue entry for another moment is stale). */
  due: number | undefined;
  failures: number;
}

/** What the rail answered an order: an accepted order's sequence number, or the answer itself. */
type Answer = number | SubmitResult;

/**
 * A callback the handler failed to apply is delivered again, backing off from the settle delay
 * up to `redeliveryBackoffMaxMs`, this many times (about ten minutes of a database outage); then
 * it waits for a re-send of the order to deliver it again.
 */
const redeliveriesMax = 25;
const redeliveryBackoffMaxMs = 30_000;

export class SpeiSimulator implements SpeiRail {
  /** Decides an order's fate instead of the configured probabilities (tests, sandbox). */
  decide: ((order: SpeiOrderMessage) => SimulatedDecision) | undefined;
  /**
   * The last submissions received (`recent.ts`), duplicates included, in arrival
   * order: what tests and the sandbox look at. Older ones are dropped, so a long-running process
   * does not keep every order it ever sent.
   */
  readonly submissions: SpeiOrderMessage[] = [];

  readonly #options: SpeiSimulatorOptions;
  readonly #random: () => number;
  readonly #results = new Map<string, Answer>();
  readonly #pending = new Map<string, Pending>();
  /** Outcomes due after the settle delay, in the order they fall due, behind one timer. */
  readonly #queueKeys: string[] = [];
  readonly #queueDue: number[] = [];
  #queueTimer: NodeJS.Timeout | undefined;
  /** Outcomes whose redeliveries ran out: kept until a re-send of the order asks for them. */
  readonly #dropped = new Map<string, Pending>();
  #handler: SpeiStateChangeHandler | undefined;
  #held = false;
  #closed = false;
  #sequence = 0;
  /** Bytes of the journal already read (restored, or caught up with). */
  #journalRead = 0;

  constructor(options: SpeiSimulatorOptions) {
    this.#options = options;
    this.#random = options.random ?? Math.random;
    if (options.journalPath) {
      this.#journalRead = existsSync(options.journalPath) ? statSync(options.journalPath).size : 0;
      this.#restore(readSpeiJournal(options.journalPath));
    }
  }

  /**
   * What other processes appended to a shared journal since it was last read: their answers
   * (so a re-sent order gets its first answer) and their deliveries (so an outcome restored here
   * is not delivered again). Their pending outcomes stay theirs to deliver.
   */
  #catchUp(): void {
    const file = this.#options.journalPath;
    if (!file || !existsSync(file)) return;
    const size = statSync(file).size;
    if (size <= this.#journalRead) return;
    const bytes = Buffer.alloc(size - this.#journalRead);
    const fd = openSync(file, "r");
    try {
      readSync(fd, bytes, 0, bytes.length, this.#journalRead);
    } finally {
      closeSync(fd);
    }
    const text = bytes.toString("utf8");
    const complete = text.slice(0, text.lastIndexOf("\n") + 1);
    this.#journalRead += Buffer.byteLength(complete);
    for (const line of complete.split("\n")) {
      if (!line) continue;
      const record = JSON.parse(line) as SpeiJournalRecord;
      if (record.e === "accepted" && !this.#results.has(record.key)) {
        // Numbered after the others' orders, as one rail numbers them.
        this.#sequence += 1;
        this.#results.set(record.key, acceptedAs(record.ref));
      } else if (record.e === "refused")
        this.#results.set(record.key, { accepted: false, detail: record.detail });
      else if (record.e === "delivered" || record.e === "cancelled") this.#pending.delete(record.key);
    }
  }

  onStateChange(handler: SpeiStateChangeHandler): void {
    this.#handler = handler;
    // Outcomes restored from the journal wait for a handler to deliver them to.
    for (const [key, pending] of this.#pending)
      if (!pending.timer && pending.due === undefined) this.#schedule(key, this.#options.settleDelayMs);
  }

  /** Rebuilds the book from the journal: answers for known orders, outcomes not yet delivered. */
  #restore(records: SpeiJournalRecord[]): void {
    for (const record of records) {
      if (record.e === "accepted") {
        this.#sequence += 1;
        this.#results.set(record.key, acceptedAs(record.ref));
        this.#pending.set(record.key, pendingOf(record, record.decision));
      } else if (record.e === "refused") {
        this.#results.set(record.key, { accepted: false, detail: record.detail });
      } else if (record.e === "delivered" || record.e === "cancelled") {
        this.#pending.delete(record.key);
      }
    }
  }

  #journal(record: SpeiJournalRecord): void {
    // Synchronous: the record is in the file before the caller hears the answer it describes.
    if (this.#options.journalPath) appendFileSync(this.#options.journalPath, `${JSON.stringify(record)}\n`);
  }

  async submitOrder(order: SpeiOrderMessage): Promise<SubmitResult> {
    // A network hop: the answer never arrives in the caller's own tick.
    await new Promise((resolve) => setImmediate(resolve));
    keepLast(this.submissions, order);
    const key = keyOf(order.operationDate, order.trackingKey);
    this.#catchUp();
    this.#journal({ e: "submit", key });
    const known = answerOf(this.#results.get(key));
    if (known) {
      if (known.accepted) this.#redeliverUndelivered(key);
      return known;
    }
    const decision = this.decide?.(order) ?? this.#draw();
    if (decision === "UNAVAILABLE") throw new RailUnavailableError("SPEI simulator: service unavailable");
    if ("reject" in decision) {
      const refused: SubmitResult = { accepted: false, detail: decision.reject };
      this.#journal({ e: "refused", key, detail: decision.reject });
      this.#results.set(key, refused);
      return refused;
    }
    this.#sequence += 1;
    const accepted: SubmitResult = {
      accepted: true,
      railReference: referenceOf(this.#sequence),
    };
    this.#journal({
      e: "accepted",
      key,
      ref: accepted.railReference,
      trackingKey: order.trackingKey,
      operationDate: order.operationDate,
      amountCents: String(order.amountCents),
      decision,
    });
    this.#results.set(key, this.#sequence);
    this.#pending.set(key, pendingOf(order, decision));
    this.#schedule(key, this.#options.settleDelayMs);
    return accepted;
  }

  /**
   * A re-sent order the rail accepted before: an outcome it gave up delivering, or one waiting out
   * a redelivery backoff, is delivered again now. One not yet tried, being delivered, delivered or
   * cancelled is left alone.
   */
  #redeliverUndelivered(key: string): void {
    const dropped = this.#dropped.get(key);
    if (dropped) {
      this.#dropped.delete(key);
      dropped.failures = 0;
      this.#pending.set(key, dropped);
      this.#schedule(key, 0);
      return;
    }
    const pending = this.#pending.get(key);
    if (pending && pending.failures > 0) this.#schedule(key, 0);
  }

  /** Distinct orders the rail holds (a re-sent order counts once). */
  get ordersAccepted(): number {
    return [...this.#results.values()].filter((answer) => answerOf(answer)?.accepted).length;
  }

  /** Queue outcomes instead of delivering them on timers. */
  hold(): void {
    this.#held = true;
    this.#unschedule();
  }

  release(): void {
    this.#held = false;
    for (const key of this.#pending.keys()) this.#schedule(key, this.#options.settleDelayMs);
  }

  /** Delivers every queued outcome now, one after another; returns how many were delivered. */
  async flush(): Promise<number> {
    let delivered = 0;
    for (const key of [...this.#pending.keys()]) {
      const pending = this.#pending.get(key);
      if (!pending) continue;
      clearTimeout(pending.timer);
      pending.due = undefined;
      if (await this.#deliver(key)) delivered += 1;
    }
    return delivered;
  }

  /** Forgets the queued outcome of an order (the sandbox forced its return already). */
  cancelPending(operationDate: string, trackingKey: string): void {
    const key = keyOf(operationDate, trackingKey);
    clearTimeout(this.#pending.get(key)?.timer);
    const wasPending = this.#pending.delete(key);
    if (this.#dropped.delete(key) || wasPending) this.#journal({ e: "cancelled", key });
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#unschedule();
    this.#pending.clear();
    this.#dropped.clear();
  }

  #draw(): SimulatedDecision {
    if (this.#random() < this.#options.unavailableProbability) return "UNAVAILABLE";
    if (this.#random() < this.#options.returnProbability) {
      const causes = this.#options.returnCauses ?? ["01", "02", "03", "17"];
      return { estado: "DEVOLUCION", causa: causes[Math.floor(this.#random() * causes.length)] ?? "01" };
    }
    return { estado: "LIQUIDACION" };
  }

  /**
   * Delivers the outcome after `delayMs`. Outcomes after the settle delay, nearly all of them,
   * fall due in the order they are scheduled, so they queue behind one timer: a timer and a
   * closure per order would outlive thousands of young collections and be promoted, only to die.
   */
  #schedule(key: string, delayMs: number): void {
    const pending = this.#pending.get(key);
    if (!pending || this.#held || this.#closed) return;
    clearTimeout(pending.timer);
    pending.timer = undefined;
    pending.due = undefined;
    if (delayMs !== this.#options.settleDelayMs) {
      pending.timer = setTimeout(() => void this.#deliver(key), delayMs);
      pending.timer.unref();
      return;
    }
    pending.due = performance.now() + delayMs;
    this.#queueKeys.push(key);
    this.#queueDue.push(pending.due);
    if (!this.#queueTimer) this.#armQueue();
  }

  #armQueue(): void {
    const next = this.#queueDue[0];
    this.#queueTimer =
      next === undefined ? undefined : setTimeout(() => this.#drainQueue(), next - performance.now());
    this.#queueTimer?.unref();
  }

  /** Delivers every queued outcome now due (one queued for another moment was rescheduled). */
  #drainQueue(): void {
    const now = performance.now();
    while ((this.#queueDue[0] ?? Number.POSITIVE_INFINITY) <= now) {
      const key = this.#queueKeys.shift() as string;
      const due = this.#queueDue.shift();
      const pending = this.#pending.get(key);
      if (pending && pending.due === due) {
        pending.due = undefined;
        void this.#deliver(key);
      }
    }
    this.#armQueue();
  }

  /** Nothing is delivered on its own until scheduled again. */
  #unschedule(): void {
    for (const pending of this.#pending.values()) {
      clearTimeout(pending.timer);
      pending.timer = undefined;
      pending.due = undefined;
    }
    clearTimeout(this.#queueTimer);
    this.#queueTimer = undefined;
    this.#queueKeys.length = 0;
    this.#queueDue.length = 0;
  }

  /**
   * Calls the handler; on failure keeps the outcome and tries again later, a bounded number of
   * times, then sets it aside for a re-send of the order to ask for (never forgotten).
   */
  async #deliver(key: string): Promise<boolean> {
    const pending = this.#pending.get(key);
    if (!pending || !this.#handler || this.#closed) return false;
    this.#pending.delete(key);
    try {
      await this.#handler(changeOf(pending));
    } catch {
      pending.failures += 1;
      if (pending.failures < redeliveriesMax && !this.#closed) {
        this.#pending.set(key, pending);
        const backoff = Math.max(100, this.#options.settleDelayMs) * 2 ** Math.min(pending.failures, 16);
        this.#schedule(key, Math.min(backoff, redeliveryBackoffMaxMs));
      } else if (!this.#closed) {
        this.#dropped.set(key, { ...pending, timer: undefined });
      }
      return false;
    }
    // After the handler applied it: a crash in between delivers it again (the handler dedups).
    this.#journal({ e: "delivered", key });
    return true;
  }
}

function keyOf(operationDate: string, trackingKey: string): string {
  return `${operationDate}|${trackingKey}`;
}

function pendingOf(
  order: { trackingKey: string; operationDate: string },
  decision: Pending["decision"],
): Pending {
  const { trackingKey, operationDate } = order;
  return { trackingKey, operationDate, decision, timer: undefined, due: undefined, failures: 0 };
}

const referencePrefix = "SIM";

function referenceOf(sequence: number): string {
  return `${referencePrefix}${String(sequence).padStart(10, "0")}`;
}

/** An accepted order's answer as kept: its sequence number when the reference is one of ours. */
function acceptedAs(railReference: string): Answer {
  const sequence = Number(railReference.slice(referencePrefix.length));
  return referenceOf(sequence) === railReference ? sequence : { accepted: true, railReference };
}

function answerOf(answer: Answer | undefined): SubmitResult | undefined {
  if (answer === undefined) return undefined;
  return typeof answer === "number" ? { accepted: true, railReference: referenceOf(answer) } : answer;
}

function changeOf(pending: Pending): SpeiStateChange {
  const { decision } = pending;
  const base = { trackingKey: pending.trackingKey, operationDate: pending.operationDate };
  switch (decision.estado) {
    case "LIQUIDACION":
      return { ...base, estado: "LIQUIDACION", detalle: "Liquidada", tsLiquidacion: new Date() };
    case "DEVOLUCION":
      return {
        ...base,
        estado: "DEVOLUCION",
        detalle: decision.detalle ?? "Devuelta por el participante receptor",
        causaDevolucion: decision.causa,
      };
    case "CANCELACION":
      return { ...base, estado: "CANCELACION", detalle: decision.detalle };
  }
}
