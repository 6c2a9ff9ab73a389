import { createHmac } from "node:crypto";
import autocannon from "autocannon";
import type { Client, SeededCard } from "./seed.ts";

/** One autocannon run: throughput, latency and answers, after a warm-up of the same load. */
export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  /** 2xx answers, warm-up included: what a money scenario must find in the books. */
  ok2xxTotal: number;
  /** Requests answered in the measured part (after the warm-up). */
  measured: number;
}

export interface LoadOptions {
  url: string;
  method?: "GET" | "POST" | "PUT";
  connections: number;
  warmupSeconds: number;
  seconds: number;
  headers?: Record<string, string>;
  /** Builds each request's body and headers; `context` is per connection. */
  request?: (context: Record<string, unknown>) => {
    body?: string;
    headers?: Record<string, string>;
    path?: string;
  };
  /** Called once the warm-up is over, as the measured part starts. */
  onMeasureStart?: () => void;
  /** Sees each answer's status with its connection's context (e.g. to count 2xx per payer). */
  onResponse?: (status: number, context: Record<string, unknown>) => void;
}

function run(options: LoadOptions, seconds: number): Promise<autocannon.Result> {
  const build = options.request;
  const seen = options.onResponse;
  return autocannon({
    url: options.url,
    method: options.method ?? "GET",
    connections: options.connections,
    duration: seconds,
    timeout: 30,
    headers: { "content-type": "application/json", ...options.headers },
    ...(build
      ? {
          requests: [
            {
              setupRequest: (request: Record<string, unknown>, context: Record<string, unknown>) => {
                const built = build(context);
                return {
                  ...request,
                  ...(built.body !== undefined ? { body: built.body } : {}),
                  ...(built.path ? { path: built.path } : {}),
                  headers: { ...(request.headers as Record<string, string>), ...built.headers },
                };
              },
              ...(seen
                ? {
                    onResponse: (status: number, _body: string, context: Record<string, unknown>) =>
                      seen(status, context),
                  }
                : {}),
            },
          ],
        }
      : {}),
  } as autocannon.Options);
}

export async function load(options: LoadOptions): Promise<LoadResult> {
  const warm = options.warmupSeconds > 0 ? await run(options, options.warmupSeconds) : undefined;
  options.onMeasureStart?.();
  const result = await run(options, options.seconds);
  const answered = (r: autocannon.Result | undefined) => (r ? r["2xx"] : 0);
  return {
    rps: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    ok2xxTotal: answered(warm) + answered(result),
    measured: result.requests.total,
  };
}

/** The body of one 1.00 MXN payment to `cardNumber` (a card UUID or a ciphered PAN), as every scenario sends it. */
function paymentBody(cardNumber: string): string {
  return JSON.stringify({
    card_number: cardNumber,
    amount: 1,
    payment_description: "bench",
    latitude: 19.4326,
    longitude: -99.1332,
  });
}

/**
 * Requests of one payer paying `cards` (UUIDs or ciphered numbers) in turn. With `keyPrefix`, each
 * carries an Idempotency-Key of its own (`<keyPrefix>-<n>`), as integrators send them.
 */
export function cardPayments(
  cards: string[],
  keyPrefix?: string,
): () => { body: string; headers?: Record<string, string> } {
  let n = 0;
  return () => {
    const body = paymentBody(cards[n % cards.length] ?? "");
    const key = `${keyPrefix}-${n++}`;
    return keyPrefix === undefined ? { body } : { body, headers: { "idempotency-key": key } };
  };
}

/** Transfers out of 1 centavo from `cards` (ids, each with PIN `pin`) in turn, to a BBVA CLABE. */
export function transferOutRequests(cards: string[], pin: string, clabe: string): () => { body: string } {
  let n = 0;
  return () => ({
    body: JSON.stringify({
      card_number: cards[n++ % cards.length],
      payment_concept: "Bench",
      beneficiary_account: clabe,
      beneficiary_institution: "40012",
      amount: 1,
      beneficiary_name: "Bench",
      numeric_reference: "1",
      beneficiary_rfc_curp: "ND",
      beneficiary_email: "bench@example.mx",
      pin,
    }),
  });
}

/**
 * Requests of many clients each paying its own cards: every connection is one client for the whole
 * run (round robin over `clients`), paying that client's cards in turn with its own token.
 */
export function distinctPayerRequests(
  clients: Client[],
  cards: SeededCard[],
): (context: Record<string, unknown>) => { headers: Record<string, string>; body: string } {
  const cardsOf = new Map(
    clients.map((x) => [
      x.clientId,
      cards.filter((card) => card.ownerClientId === x.clientId).map((card) => card.id),
    ]),
  );
  let next = 0;
  return (context) => {
    context.client ??= clients[next++ % clients.length];
    const client = context.client as Client;
    const mine = cardsOf.get(client.clientId) ?? [];
    context.i = ((context.i as number | undefined) ?? 0) + 1;
    return {
      headers: { authorization: `Bearer ${client.token}` },
      body: paymentBody(mine[(context.i as number) % mine.length] ?? ""),
    };
  };
}

/**
 * Signed AUTHORIZATION messages of 1.00 MXN over `cards` in turn, each with a message id of its own,
 * as a card processor sends them (header X-Card-Network-Signature under `secret`).
 */
export function authorizationRequests(
  cards: string[],
  secret: string,
): () => { body: string; headers: Record<string, string> } {
  let n = 0;
  const run = `${process.pid}-${Date.now()}`;
  return () => {
    const body = JSON.stringify({
      message_id: `BENCH-${run}-${n}`,
      type: "AUTHORIZATION",
      card_id: cards[n++ % cards.length],
      amount: 100,
      currency: "484",
      channel: "CONTACTLESS",
      merchant: { name: "BENCH MERCHANT", city: "CDMX", country: "MEX", mcc: "5411", acceptor_id: "B1" },
    });
    const t = Math.floor(Date.now() / 1000);
    const mac = createHmac("sha256", secret).update(`${t}.${body}`).digest("hex");
    return { body, headers: { "x-card-network-signature": `t=${t},v1=${mac}` } };
  };
}
