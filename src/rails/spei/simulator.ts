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
 * failed to apply, as a real rail retries its webhooks.
 *
 * Tests and the sandbox steer it deterministically: `decide` overrides the dice per order,
 * `hold()` queues outcomes until `flush()` delivers them.
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
}

export type SimulatedDecision =
  | { estado: "LIQUIDACION" }
  | { estado: "DEVOLUCION"; causa: string; detalle?: string }
  | { estado: "CANCELACION"; detalle: string }
  /** Refuse the order at submission. */
  | { reject: string }
  /** Fail the submission as if the rail were unreachable (nothing is recorded). */
  | "UNAVAILABLE";

interface Pending {
  order: SpeiOrderMessage;
  decision: Exclude<SimulatedDecision, "UNAVAILABLE" | { reject: string }>;
  timer: NodeJS.Timeout | undefined;
  failures: number;
}

const redeliveriesMax = 5;

export class SpeiSimulator implements SpeiRail {
  /** Decides an order's fate instead of the configured probabilities (tests, sandbox). */
  decide: ((order: SpeiOrderMessage) => SimulatedDecision) | undefined;
  /** Every submission received, duplicates included, in arrival order. */
  readonly submissions: SpeiOrderMessage[] = [];

  readonly #options: SpeiSimulatorOptions;
  readonly #random: () => number;
  readonly #results = new Map<string, SubmitResult>();
  readonly #pending = new Map<string, Pending>();
  #handler: SpeiStateChangeHandler | undefined;
  #held = false;
  #closed = false;
  #sequence = 0;

  constructor(options: SpeiSimulatorOptions) {
    this.#options = options;
    this.#random = options.random ?? Math.random;
  }

  onStateChange(handler: SpeiStateChangeHandler): void {
    this.#handler = handler;
  }

  async submitOrder(order: SpeiOrderMessage): Promise<SubmitResult> {
    // A network hop: the answer never arrives in the caller's own tick.
    await new Promise((resolve) => setImmediate(resolve));
    this.submissions.push(order);
    const key = keyOf(order.operationDate, order.trackingKey);
    const known = this.#results.get(key);
    if (known) return known;
    const decision = this.decide?.(order) ?? this.#draw();
    if (decision === "UNAVAILABLE") throw new RailUnavailableError("SPEI simulator: service unavailable");
    if ("reject" in decision) {
      const refused: SubmitResult = { accepted: false, detail: decision.reject };
      this.#results.set(key, refused);
      return refused;
    }
    this.#sequence += 1;
    const accepted: SubmitResult = {
      accepted: true,
      railReference: `SIM${String(this.#sequence).padStart(10, "0")}`,
    };
    this.#results.set(key, accepted);
    this.#pending.set(key, { order, decision, timer: undefined, failures: 0 });
    this.#schedule(key, this.#options.settleDelayMs);
    return accepted;
  }

  /** Distinct orders the rail holds (a re-sent order counts once). */
  get ordersAccepted(): number {
    return [...this.#results.values()].filter((r) => r.accepted).length;
  }

  /** Queue outcomes instead of delivering them on timers. */
  hold(): void {
    this.#held = true;
    for (const pending of this.#pending.values()) {
      clearTimeout(pending.timer);
      pending.timer = undefined;
    }
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
      if (await this.#deliver(key)) delivered += 1;
    }
    return delivered;
  }

  /** Forgets the queued outcome of an order (the sandbox forced its return already). */
  cancelPending(operationDate: string, trackingKey: string): void {
    const key = keyOf(operationDate, trackingKey);
    clearTimeout(this.#pending.get(key)?.timer);
    this.#pending.delete(key);
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const pending of this.#pending.values()) clearTimeout(pending.timer);
    this.#pending.clear();
  }

  #draw(): SimulatedDecision {
    if (this.#random() < this.#options.unavailableProbability) return "UNAVAILABLE";
    if (this.#random() < this.#options.returnProbability) {
      const causes = this.#options.returnCauses ?? ["01", "02", "03", "17"];
      return { estado: "DEVOLUCION", causa: causes[Math.floor(this.#random() * causes.length)] ?? "01" };
    }
    return { estado: "LIQUIDACION" };
  }

  #schedule(key: string, delayMs: number): void {
    const pending = this.#pending.get(key);
    if (!pending || this.#held || this.#closed) return;
    clearTimeout(pending.timer);
    pending.timer = setTimeout(() => void this.#deliver(key), delayMs);
    pending.timer.unref();
  }

  /** Calls the handler; on failure keeps the outcome and tries again later, a bounded number of times. */
  async #deliver(key: string): Promise<boolean> {
    const pending = this.#pending.get(key);
    if (!pending || !this.#handler || this.#closed) return false;
    this.#pending.delete(key);
    try {
      await this.#handler(changeOf(pending));
      return true;
    } catch {
      pending.failures += 1;
      if (pending.failures < redeliveriesMax && !this.#closed) {
        this.#pending.set(key, pending);
        this.#schedule(key, Math.max(100, this.#options.settleDelayMs) * 2 ** pending.failures);
      }
      return false;
    }
  }
}

function keyOf(operationDate: string, trackingKey: string): string {
  return `${operationDate}|${trackingKey}`;
}

function changeOf(pending: Pending): SpeiStateChange {
  const { order, decision } = pending;
  const base = { trackingKey: order.trackingKey, operationDate: order.operationDate };
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
