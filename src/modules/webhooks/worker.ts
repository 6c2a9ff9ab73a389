import { open } from "../../crypto/vault.ts";
import type { Db } from "../../db/database.ts";
import { AppError } from "../../errors.ts";
import { limits } from "../../limits.ts";
import { presentEvent } from "../events/service.ts";
import type { AttemptOutcome, WebhookAttemptCounter } from "./metrics.ts";
import { LocalAddressRefused, post, type Resolve, resolveByDns } from "./post.ts";
import * as repo from "./repository.ts";
import { secretContext, signedHeaders } from "./signature.ts";
import { checkWebhookUrl, isSandboxLocal } from "./url.ts";

/**
 * The delivery worker: runs in the service process (main.ts starts it when EMISOR_WORKERS is
 * true) and is safe to run in many processes on one database. It claims due deliveries with
 * FOR UPDATE SKIP LOCKED under a lease, POSTs each signed event with a timeout, and records the
 * outcome: delivered, retried with exponential backoff, or failed after the last attempt, which
 * disables an endpoint that has not succeeded since that delivery was created.
 *
 * Delivery is at least once: a worker that dies between sending and recording leaves the lease
 * to expire and another worker sends again, with the same webhook-id (the event's id).
 */
export interface DeliveryTiming {
  pollIntervalMs: number;
  backoffBaseMs: number;
  timeoutMs: number;
  attemptsMax: number;
  /** How long a claimed delivery is hidden from other workers; must exceed timeoutMs. */
  leaseMs: number;
  /** Deliveries this worker sends at the same time. */
  concurrency: number;
  /** Of those, how many one client's endpoints may hold (limits.webhookConcurrencyPerClientMax). */
  concurrencyPerClient: number;
}

export function defaultDeliveryTiming(): DeliveryTiming {
  return {
    pollIntervalMs: limits.webhookPollIntervalMs,
    backoffBaseMs: limits.webhookBackoffBaseMs,
    timeoutMs: limits.webhookTimeoutMs,
    attemptsMax: limits.webhookAttemptsMax,
    leaseMs: limits.webhookTimeoutMs + limits.webhookLeaseMarginMs,
    concurrency: limits.webhookConcurrencyMax,
    concurrencyPerClient: limits.webhookConcurrencyPerClientMax,
  };
}

export interface WorkerLogger {
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
}

type Outcome =
  | { kind: "delivered"; statusCode: number }
  | { kind: "failed"; statusCode: number | null; error: string }
  | { kind: "stopped" };

export class WebhookWorker {
  readonly #db: Db;
  readonly #vaultKey: Buffer;
  readonly #timing: DeliveryTiming;
  readonly #log: WorkerLogger;
  readonly #sandbox: boolean;
  readonly #resolve: Resolve;
  readonly #attempts: WebhookAttemptCounter | undefined;
  readonly #stop = new AbortController();
  readonly #inFlight = new Set<Promise<void>>();
  /** Deliveries in flight per endpoint owner (see claimDueDeliveries' fairness). */
  readonly #inFlightByClient = new Map<string, number>();
  #loop: Promise<void> | undefined;
  #wake: (() => void) | undefined;

  constructor(options: {
    db: Db;
    vaultKey: Buffer;
    log: WorkerLogger;
    /** Whether the sandbox's URLs (http to localhost) may be called: as when endpoints are registered. */
    sandbox: boolean;
    timing?: Partial<DeliveryTiming>;
    /** How host names are resolved (the system's resolver; tests give their own). */
    resolve?: Resolve;
    /** Counts each recorded attempt by its outcome (the context's, which /metrics shows). */
    attempts?: WebhookAttemptCounter;
  }) {
    this.#attempts = options.attempts;
    this.#db = options.db;
    this.#vaultKey = options.vaultKey;
    this.#log = options.log;
    this.#sandbox = options.sandbox;
    this.#resolve = options.resolve ?? resolveByDns;
    this.#timing = { ...defaultDeliveryTiming(), ...options.timing };
  }

  start(): this {
    this.#loop ??= this.#run();
    return this;
  }

  /** Deliveries being attempted now (what a stop waits for). */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Stops claiming, aborts attempts in flight and gives them back, and waits for all of it. */
  async stop(): Promise<void> {
    this.#stop.abort();
    this.#wake?.();
    await this.#loop;
    await Promise.allSettled([...this.#inFlight]);
  }

  async #run(): Promise<void> {
    while (!this.#stop.signal.aborted) {
      const free = this.#timing.concurrency - this.#inFlight.size;
      let claimed: repo.ClaimedDelivery[] = [];
      if (free > 0) {
        try {
          const perClient = this.#timing.concurrencyPerClient;
          const busyClients = [...this.#inFlightByClient]
            .filter(([, count]) => count >= perClient)
            .map(([clientId]) => clientId);
          claimed = await repo.claimDueDeliveries(this.#db, free, this.#timing.leaseMs, {
            perClient,
            busyClients,
          });
        } catch (error) {
          this.#log.warn({ err: error }, "webhook worker could not claim deliveries");
        }
      }
      for (const delivery of claimed) this.#track(delivery.endpoint_client_id, this.#deliver(delivery));
      // Claim again at once only when a full batch came back and there is room for more.
      if (claimed.length === 0 || claimed.length < free || this.#inFlight.size >= this.#timing.concurrency)
        await this.#sleep();
    }
  }

  /** Waits for the poll interval, a finished delivery (a free slot) or stop(). */
  #sleep(): Promise<void> {
    if (this.#stop.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, this.#timing.pollIntervalMs);
      this.#wake = done;
    });
  }

  #track(clientId: string, work: Promise<void>): void {
    this.#inFlight.add(work);
    this.#inFlightByClient.set(clientId, (this.#inFlightByClient.get(clientId) ?? 0) + 1);
    void work.finally(() => {
      this.#inFlight.delete(work);
      const left = (this.#inFlightByClient.get(clientId) ?? 1) - 1;
      if (left > 0) this.#inFlightByClient.set(clientId, left);
      else this.#inFlightByClient.delete(clientId);
      if (this.#inFlight.size === this.#timing.concurrency - 1) this.#wake?.();
    });
  }

  async #deliver(delivery: repo.ClaimedDelivery): Promise<void> {
    const outcome = await this.#send(delivery);
    try {
      if (outcome.kind === "stopped") await repo.releaseClaim(this.#db, delivery);
      else {
        const counted = await recordOutcome(this.#db, delivery, outcome, this.#timing);
        if (counted) this.#attempts?.inc({ outcome: counted });
      }
    } catch (error) {
      // The lease runs out and the delivery is tried again: at least once, never lost.
      this.#log.error({ err: error, delivery_id: delivery.id }, "webhook worker could not record an attempt");
    }
  }

  async #send(delivery: repo.ClaimedDelivery): Promise<Outcome> {
    // The URL was checked when it was registered; it is checked again before every call, by
    // today's rules: an endpoint registered in sandbox (http://localhost) is not called once the
    // service runs outside it, nor one a later release's rules refuse.
    let url: string;
    try {
      url = checkWebhookUrl(delivery.url, this.#sandbox);
    } catch (error) {
      return notCalled(error instanceof AppError ? error.message : "the URL is not allowed");
    }
    let headers: Record<string, string>;
    const body = JSON.stringify(
      presentEvent({
        id: delivery.event_id,
        type: delivery.event_type,
        client_id: delivery.event_client_id,
        data: delivery.event_data,
        created_at: delivery.event_created_at,
      }),
    );
    try {
      headers = signedHeaders(
        this.#secretsOf(delivery),
        delivery.event_id,
        Math.floor(Date.now() / 1000),
        body,
      );
    } catch (error) {
      this.#log.error(
        { err: error, endpoint_id: delivery.endpoint_id },
        "webhook signing secret unavailable",
      );
      return {
        kind: "failed",
        statusCode: null,
        error: "internal error: the signing secret could not be read",
      };
    }
    const timeout = AbortSignal.timeout(this.#timing.timeoutMs);
    try {
      const status = await post(url, {
        headers: { ...headers, "content-type": "application/json", "user-agent": "Emisor-Webhooks/1" },
        body,
        signal: AbortSignal.any([timeout, this.#stop.signal]),
        resolve: this.#resolve,
        allowLocal: isSandboxLocal(new URL(url), this.#sandbox),
      });
      // Only the status counts; the body is not read (it is the receiver's, not ours to keep).
      if (status >= 200 && status < 300) return { kind: "delivered", statusCode: status };
      const redirect = status >= 300 && status < 400 ? " (redirects are not followed)" : "";
      return { kind: "failed", statusCode: status, error: `HTTP ${status}${redirect}` };
    } catch (error) {
      if (this.#stop.signal.aborted) return { kind: "stopped" };
      if (timeout.aborted)
        return { kind: "failed", statusCode: null, error: `timed out after ${this.#timing.timeoutMs} ms` };
      if (error instanceof LocalAddressRefused) return notCalled(error.message);
      return { kind: "failed", statusCode: null, error: connectionError(error) };
    }
  }

  #secretsOf(delivery: repo.ClaimedDelivery): string[] {
    const context = secretContext(delivery.endpoint_id);
    const secrets = [open(this.#vaultKey, delivery.secret_sealed, context)];
    const now = Date.now();
    for (const retired of delivery.retired_secrets) {
      if (Date.parse(retired.expires_at) > now) secrets.push(open(this.#vaultKey, retired.sealed, context));
    }
    return secrets;
  }
}

/** An attempt that was not made: the URL or what its name resolves to is not allowed. */
function notCalled(reason: string): Outcome {
  return {
    kind: "failed",
    statusCode: null,
    error: `not called: ${reason}`.slice(0, limits.webhookErrorLengthMax),
  };
}

function connectionError(error: unknown): string {
  const code = (error as { code?: unknown } | undefined)?.code;
  const detail = typeof code === "string" ? code : "network error";
  return `connection failed: ${detail}`.slice(0, limits.webhookErrorLengthMax);
}

/** base * 2^(attempt-1), plus up to 10% so that retries after an outage do not arrive together. */
export function backoffMs(timing: DeliveryTiming, attempt: number): number {
  const delay = timing.backoffBaseMs * 2 ** (attempt - 1);
  return Math.round(delay + Math.random() * delay * 0.1);
}

/**
 * Records one attempt's outcome and what it means for its endpoint, in one transaction; answers
 * what it recorded (undefined: nothing, another worker had claimed the delivery since).
 */
async function recordOutcome(
  db: Db,
  delivery: repo.ClaimedDelivery,
  outcome: Exclude<Outcome, { kind: "stopped" }>,
  timing: DeliveryTiming,
): Promise<AttemptOutcome | undefined> {
  return db.transaction().execute(async (tx): Promise<AttemptOutcome | undefined> => {
    if (outcome.kind === "delivered") {
      await repo.markDelivered(tx, delivery.id, outcome.statusCode);
      await repo.noteEndpointSuccess(tx, delivery.endpoint_id);
      return "delivered";
    }
    const last = delivery.attempts >= timing.attemptsMax;
    const recorded = await repo.recordFailedAttempt(tx, delivery, {
      statusCode: outcome.statusCode,
      error: outcome.error,
      retryInMs: last ? null : backoffMs(timing, delivery.attempts),
    });
    if (!recorded) return undefined;
    const endpoint = await repo.noteEndpointFailure(tx, delivery.endpoint_id, outcome.error);
    // Disabled only when the endpoint failed for a delivery's whole retry period, with no success
    // in between: one event a receiver rejects does not disable an endpoint that otherwise works.
    const failingThroughout =
      endpoint?.status === "ENABLED" &&
      (endpoint.last_success_at === null || endpoint.last_success_at < delivery.created_at);
    if (last && failingThroughout) {
      const reason =
        `All ${delivery.attempts} attempts to deliver event ${delivery.event_id} since ` +
        `${delivery.created_at.toISOString()} failed, with no successful delivery in between; ` +
        `last error: ${outcome.error}`;
      await repo.disableEndpoint(tx, delivery.endpoint_id, reason);
    }
    return last ? "failed" : "retrying";
  });
}
