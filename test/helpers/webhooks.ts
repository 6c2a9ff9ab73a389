import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { type EventType, emitEvents } from "../../src/modules/events/outbox.ts";
import type { Resolve } from "../../src/modules/webhooks/post.ts";
import { type DeliveryTiming, WebhookWorker } from "../../src/modules/webhooks/worker.ts";
import type { TestApp } from "./harness.ts";

/** What webhook tests share: a real local receiver, sub-clients, events, workers and polling. */

export interface Receipt {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface Receiver {
  /** Base URL, e.g. http://127.0.0.1:40123; endpoints add a path to tell them apart. */
  url: string;
  receipts: Receipt[];
  close(): Promise<void>;
}

/** What the receiver answers to its n-th request (0-based): a status, maybe after a delay. */
export type Behaviour = (receipt: Receipt, index: number) => { status: number; delayMs?: number };

/** A real HTTP server on 127.0.0.1 and a free port, recording every request it gets. */
export async function startReceiver(behaviour: Behaviour = () => ({ status: 204 })): Promise<Receiver> {
  const receipts: Receipt[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const receipt = {
        path: request.url ?? "",
        headers: request.headers,
        body: Buffer.concat(chunks).toString(),
      };
      receipts.push(receipt);
      const { status, delayMs = 0 } = behaviour(receipt, receipts.length - 1);
      const timer = setTimeout(() => {
        timers.delete(timer);
        response.writeHead(status, { "content-type": "text/plain" }).end("receiver says hello");
      }, delayMs);
      timers.add(timer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    receipts,
    close: async () => {
      for (const timer of timers) clearTimeout(timer);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Timings that make polls and retries take milliseconds. The timeout stays generous (a loaded
 * machine must not turn a healthy receiver into a timeout); the timeout test sets its own.
 */
export const fastTiming: DeliveryTiming = {
  pollIntervalMs: 10,
  backoffBaseMs: 10,
  timeoutMs: 5_000,
  attemptsMax: 4,
  leaseMs: 20_000,
  concurrency: 8,
  concurrencyPerClient: 8,
};

export function startWorker(
  t: TestApp,
  timing: Partial<DeliveryTiming> = {},
  sandbox = t.config.sandbox,
  resolve?: Resolve,
): WebhookWorker {
  return new WebhookWorker({
    db: t.ctx.db,
    vaultKey: t.ctx.keys.vault,
    log: t.app.log,
    sandbox,
    timing: { ...fastTiming, ...timing },
    ...(resolve ? { resolve } : {}),
  }).start();
}

/** Polls until `check` returns a value (not undefined/false), failing after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Emits events in one committed transaction, as a module would; returns their ids. */
export async function emit(
  t: TestApp,
  events: { type: EventType; clientId: string; data?: Record<string, unknown> }[],
): Promise<string[]> {
  return t.ctx.db.transaction().execute((tx) =>
    emitEvents(
      tx,
      events.map((e) => ({ ...e, data: e.data ?? { note: "test" } })),
    ),
  );
}

export type Verify = (
  secret: string,
  headers: IncomingHttpHeaders,
  rawBody: string,
  toleranceSeconds?: number,
) => boolean;

/** The events guide's verification snippet, loaded as a receiver would paste it. */
export async function readmeVerifier(): Promise<Verify> {
  const guide = readFileSync(new URL("../../docs/guides/events-and-webhooks.md", import.meta.url), "utf8");
  const code = /```js\n(import \{ createHmac[\s\S]*?)```/.exec(guide)?.[1];
  if (!code) throw new Error("the events guide has no verification snippet");
  const file = path.join(mkdtempSync(path.join(tmpdir(), "emisor-verify-")), "verify.mjs");
  writeFileSync(file, code);
  const module = (await import(file)) as { verifyWebhook: Verify };
  return module.verifyWebhook;
}
