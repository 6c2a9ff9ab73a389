import { keepLast } from "../recent.ts";
import {
  type AirtimeProvider,
  AirtimeProviderUnavailableError,
  type AirtimeResult,
  type AirtimeTopupRequest,
} from "./port.ts";

/**
 * The default airtime adapter: answers after `delayMs`, fails a share of top-ups
 * (`failureProbability`, as a carrier outage would), refuses numbers that cannot exist in Mexico
 * (a first digit 0 or 1: no Mexican area code starts so), and deduplicates by top-up id (the same
 * id always gets the same answer). A top-up is decided when it arrives and answered `delayMs`
 * later; a retry of one already decided (its first answer still on its way, or lost to a call that
 * gave up) is answered at once, as a provider looks its own answer up: a retry never waits the
 * delay again, so a caller whose wait ran out gets its answer next time. `decide` overrides the
 * dice per request for tests.
 */
export interface AirtimeSimulatorOptions {
  delayMs: number;
  /** 0..1: share of top-ups the provider fails. */
  failureProbability: number;
  random?: () => number;
}

export type AirtimeDecision = AirtimeResult | "UNAVAILABLE";

export class AirtimeSimulator implements AirtimeProvider {
  decide: ((request: AirtimeTopupRequest) => AirtimeDecision) | undefined;
  /** The last requests received (`recent.ts`), duplicates included. */
  readonly requests: AirtimeTopupRequest[] = [];

  readonly #options: AirtimeSimulatorOptions;
  readonly #random: () => number;
  readonly #results = new Map<string, AirtimeResult>();
  readonly #timers = new Map<NodeJS.Timeout, () => void>();
  #sequence = 0;

  constructor(options: AirtimeSimulatorOptions) {
    this.#options = options;
    this.#random = options.random ?? Math.random;
  }

  async topup(request: AirtimeTopupRequest): Promise<AirtimeResult> {
    keepLast(this.requests, request);
    const known = this.#results.get(request.id);
    if (known) return known;
    const decision = this.decide?.(request) ?? this.#draw(request);
    // Unavailable: nothing is decided, and a retry is a new attempt (with its own delay).
    if (decision !== "UNAVAILABLE") this.#results.set(request.id, decision);
    await this.#wait(this.#options.delayMs);
    if (decision === "UNAVAILABLE")
      throw new AirtimeProviderUnavailableError("airtime simulator: unavailable");
    return decision;
  }

  /** Distinct top-ups the provider delivered. */
  get delivered(): number {
    return [...this.#results.values()].filter((r) => r.status === "COMPLETED").length;
  }

  async close(): Promise<void> {
    // Waits end at once so that nothing hangs on shutdown.
    for (const [timer, resolve] of this.#timers) {
      clearTimeout(timer);
      resolve();
    }
    this.#timers.clear();
  }

  #draw(request: AirtimeTopupRequest): AirtimeResult {
    if (/^[01]/.test(request.phoneNumber)) {
      return { status: "FAILED", reason: "Número no válido para el operador", retryable: false };
    }
    if (this.#random() < this.#options.failureProbability) {
      return { status: "FAILED", reason: `${request.carrier} no disponible`, retryable: true };
    }
    this.#sequence += 1;
    return { status: "COMPLETED", reference: `AT${Date.now().toString(36).toUpperCase()}${this.#sequence}` };
  }

  #wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      if (ms <= 0) {
        setImmediate(resolve);
        return;
      }
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        resolve();
      }, ms);
      this.#timers.set(timer, resolve);
    });
  }
}
