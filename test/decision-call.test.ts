// Proves requestDecision against a real HTTP server on 127.0.0.1: the signed request it sends, and
// that only a signed, well-formed answer decides (approve, decline, partial), while a timeout, a
// refused connection, another status, a redirect, an oversized, unsigned, stale or wrongly signed
// answer, or a body that breaks the rules stands in with WEBHOOK_TIMEOUT or WEBHOOK_ERROR.
import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { limits } from "../src/limits.ts";
import {
  type DecisionEndpoint,
  type DecisionRequest,
  type DecisionResult,
  decisionRequestType,
  requestDecision,
} from "../src/modules/decisions/call.ts";
import { decisionCallCounter } from "../src/modules/decisions/metrics.ts";
import { hasValidSignature, newSigningSecret, sign } from "../src/modules/webhooks/signature.ts";

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  socket: number;
}

/** What the server does with a request to a path: its own answer, written on `response`. */
type Handler = (received: Received, response: ServerResponse) => void;

const secret = newSigningSecret();
const handlers = new Map<string, Handler>();
const received: Received[] = [];
let base = "";
let closeServer: () => Promise<void> = async () => {};
const timers = new Set<NodeJS.Timeout>();

before(async () => {
  let sockets = 0;
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const socket = request.socket as typeof request.socket & { serial?: number };
      socket.serial ??= ++sockets;
      const entry = {
        path: request.url ?? "",
        headers: request.headers,
        body: Buffer.concat(chunks).toString(),
        socket: socket.serial,
      };
      received.push(entry);
      const handler = handlers.get(entry.path);
      if (handler) handler(entry, response);
      else response.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  closeServer = async () => {
    for (const timer of timers) clearTimeout(timer);
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
});
after(() => closeServer());

let serial = 0;
function authorization(overrides: Partial<DecisionRequest> = {}): DecisionRequest {
  serial += 1;
  return {
    authorizationId: `0190a6f0-0000-7000-8000-${String(serial).padStart(12, "0")}`,
    cardId: "5d2c7e10-3b8f-4a6d-8e21-7c9b0a1f2e3d",
    clientId: "0b6e9a52-6a41-4c1e-9d3b-1f2a3b4c5d6e",
    cardholderId: null,
    amountCents: 10_000n,
    currency: "484",
    merchantAmount: 10_000n,
    merchant: { name: "OXXO INSURGENTES", city: "CDMX", country: "MX", mcc: "5499" },
    channel: "POS_CHIP",
    partialAllowed: false,
    createdAt: new Date("2026-05-01T17:03:12.481Z"),
    ...overrides,
  };
}

/** An answer signed as a client signs it: with the request's webhook-id, over the body sent. */
function signedAnswer(
  body: string,
  id: string,
  options: { key?: string; timestamp?: number; status?: number } = {},
): { status: number; headers: Record<string, string>; body: string } {
  const timestamp = options.timestamp ?? Math.floor(Date.now() / 1000);
  return {
    status: options.status ?? 200,
    headers: {
      "content-type": "application/json",
      "webhook-id": id,
      "webhook-timestamp": String(timestamp),
      "webhook-signature": sign(options.key ?? secret, id, timestamp, body),
    },
    body,
  };
}

/** A path whose handler answers `answer(request)` (JSON, signed unless the answer says otherwise). */
function route(answer: (r: Received) => { status: number; headers: Record<string, string>; body: string }) {
  const path = `/decide-${++serial}`;
  handlers.set(path, (r, response) => {
    const reply = answer(r);
    response.writeHead(reply.status, reply.headers).end(reply.body);
  });
  return path;
}

const approve = (extra: Record<string, unknown> = {}) =>
  route((r) =>
    signedAnswer(JSON.stringify({ decision: "APPROVE", ...extra }), String(r.headers["webhook-id"])),
  );

async function decide(
  path: string,
  request = authorization(),
  endpoint: Partial<DecisionEndpoint> = {},
): Promise<DecisionResult> {
  return requestDecision({ url: `${base}${path}`, timeoutMs: 2_000, secret, ...endpoint }, request, {
    sandbox: true,
  });
}

function expectStandIn(result: DecisionResult, reason: "WEBHOOK_TIMEOUT" | "WEBHOOK_ERROR", detail: RegExp) {
  assert.equal(
    result.kind,
    "STAND_IN",
    JSON.stringify(result, (_, v) => (typeof v === "bigint" ? `${v}` : v)),
  );
  if (result.kind !== "STAND_IN") return;
  assert.equal(result.reason, reason);
  assert.match(result.detail, detail);
  assert.ok(result.detail.length <= limits.authorizationDecisionDetailLengthMax);
}

test("approve: the request is the authorization, signed as webhooks are, with its id as Idempotency-Key", async () => {
  const path = approve({ metadata: { order_id: "A-1001", "cost.center": "ventas" } });
  const request = authorization({ cardholderId: "9a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d" });
  const result = await decide(path, request);
  assert.deepEqual(result, { kind: "APPROVE", metadata: { order_id: "A-1001", "cost.center": "ventas" } });
  const sent = received.find((r) => r.path === path);
  assert.ok(sent);
  assert.equal(sent.headers["webhook-id"], request.authorizationId);
  assert.equal(sent.headers["idempotency-key"], request.authorizationId);
  assert.equal(sent.headers["content-type"], "application/json");
  const timestamp = String(sent.headers["webhook-timestamp"]);
  assert.ok(Math.abs(Number(timestamp) - Date.now() / 1000) < 5);
  assert.ok(
    hasValidSignature(
      [secret],
      { id: request.authorizationId, timestamp, body: sent.body },
      String(sent.headers["webhook-signature"]),
    ),
  );
  assert.deepEqual(JSON.parse(sent.body), {
    type: decisionRequestType,
    authorization: {
      id: request.authorizationId,
      card_id: request.cardId,
      client_id: request.clientId,
      cardholder_id: request.cardholderId,
      amount_cents: 10_000,
      currency: "484",
      merchant_amount: 10_000,
      merchant: request.merchant,
      channel: "POS_CHIP",
      partial_allowed: false,
      created_at: "2026-05-01T17:03:12.481Z",
    },
  });
});

test("decline: the client's own reason and metadata; without a reason, CLIENT_DECLINED", async () => {
  const declined = route((r) =>
    signedAnswer(
      JSON.stringify({ decision: "DECLINE", reason: "OVER_BUDGET_2026", metadata: { rule: "monthly" } }),
      String(r.headers["webhook-id"]),
    ),
  );
  assert.deepEqual(await decide(declined), {
    kind: "DECLINE",
    reason: "OVER_BUDGET_2026",
    metadata: { rule: "monthly" },
  });
  const plain = route((r) =>
    signedAnswer('{"decision":"DECLINE","metadata":null}', String(r.headers["webhook-id"])),
  );
  assert.deepEqual(await decide(plain), { kind: "DECLINE", reason: "CLIENT_DECLINED" });
  for (const reason of ["over budget", "x", "A".repeat(33), "ÑANDU", 42]) {
    const bad = route((r) =>
      signedAnswer(JSON.stringify({ decision: "DECLINE", reason }), String(r.headers["webhook-id"])),
    );
    expectStandIn(await decide(bad), "WEBHOOK_ERROR", /malformed answer: reason must match/);
  }
});

test("partial approval: a smaller amount only when the authorization allows it, never more, never 0", async () => {
  const partial = approve({ amount_cents: 4_000 });
  assert.deepEqual(await decide(partial, authorization({ partialAllowed: true })), {
    kind: "APPROVE",
    amountCents: 4_000n,
  });
  expectStandIn(await decide(partial), "WEBHOOK_ERROR", /does not allow partial approval/);
  assert.deepEqual(await decide(approve({ amount_cents: 10_000 })), {
    kind: "APPROVE",
    amountCents: 10_000n,
  });
  const allowed = authorization({ partialAllowed: true });
  expectStandIn(
    await decide(approve({ amount_cents: 10_001 }), allowed),
    "WEBHOOK_ERROR",
    /more than the authorization asks/,
  );
  for (const amount of [0, -5, 1.5, "4000", 2 ** 53])
    expectStandIn(
      await decide(approve({ amount_cents: amount }), allowed),
      "WEBHOOK_ERROR",
      /positive integer/,
    );
  expectStandIn(await decide(approve({ reason: "X" })), "WEBHOOK_ERROR", /reason is for DECLINE only/);
});

test("slow: no answer within timeout_ms is WEBHOOK_TIMEOUT, also when the body trickles", async () => {
  const slow = `/slow-${++serial}`;
  handlers.set(slow, (r, response) => {
    const timer = setTimeout(() => {
      const answer = signedAnswer('{"decision":"APPROVE"}', String(r.headers["webhook-id"]));
      response.writeHead(200, answer.headers).end(answer.body);
    }, 1_000);
    timers.add(timer);
  });
  expectStandIn(await decide(slow, authorization(), { timeoutMs: 100 }), "WEBHOOK_TIMEOUT", /within 100 ms/);
  const trickle = `/trickle-${++serial}`;
  handlers.set(trickle, (r, response) => {
    const answer = signedAnswer('{"decision":"APPROVE"}', String(r.headers["webhook-id"]));
    response.writeHead(200, answer.headers);
    response.write(answer.body.slice(0, 3));
    const timer = setTimeout(() => response.end(answer.body.slice(3)), 1_000);
    timers.add(timer);
  });
  expectStandIn(
    await decide(trickle, authorization(), { timeoutMs: 100 }),
    "WEBHOOK_TIMEOUT",
    /within 100 ms/,
  );
});

test("down: a refused connection is WEBHOOK_ERROR", async () => {
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const result = await requestDecision(
    { url: `http://127.0.0.1:${port}/decide`, timeoutMs: 2_000, secret },
    authorization(),
    { sandbox: true },
  );
  expectStandIn(result, "WEBHOOK_ERROR", /connection failed: ECONNREFUSED/);
});

test("garbage, unknown fields and bad metadata: WEBHOOK_ERROR, even signed", async () => {
  const cases: [string, RegExp][] = [
    ["not json at all", /not JSON/],
    ["[1,2]", /must be a JSON object/],
    ['{"decision":"MAYBE"}', /decision must be "APPROVE" or "DECLINE"/],
    ["{}", /decision must be/],
    ['{"decision":"APPROVE","amount_cent":100}', /unknown field amount_cent/],
    ['{"decision":"APPROVE","__proto__":{"x":1}}', /unknown field __proto__/],
    ['{"decision":"APPROVE","metadata":["a"]}', /metadata must be an object/],
    ['{"decision":"APPROVE","metadata":{"a":1}}', /metadata values must be strings/],
    ['{"decision":"APPROVE","metadata":{"_x":"1"}}', /metadata keys must match/],
    ['{"decision":"APPROVE","metadata":{"a":"\\u0000"}}', /NUL or unpaired surrogates/],
    ['{"decision":"APPROVE","metadata":{"a":"\\ud800"}}', /NUL or unpaired surrogates/],
    [JSON.stringify({ decision: "APPROVE", metadata: { a: "x".repeat(201) } }), /at most 200 characters/],
    [
      JSON.stringify({
        decision: "APPROVE",
        metadata: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, "v"])),
      }),
      /more than 20 entries/,
    ],
  ];
  for (const [body, detail] of cases) {
    const path = route((r) => signedAnswer(body, String(r.headers["webhook-id"])));
    expectStandIn(await decide(path), "WEBHOOK_ERROR", detail);
  }
  // Card numbers the client puts in metadata are kept masked, as Emisor keeps any text it is sent.
  const masked = approve({ metadata: { note: "card 4111111111111111", emoji: "😀".repeat(200) } });
  const result = await decide(masked);
  assert.equal(result.kind, "APPROVE");
  if (result.kind === "APPROVE") assert.equal(result.metadata?.note, "card ************1111");
});

test("unsigned, wrongly signed, another webhook-id or a stale timestamp: WEBHOOK_ERROR", async () => {
  const body = '{"decision":"APPROVE"}';
  const unsigned = route(() => ({ status: 200, headers: { "content-type": "application/json" }, body }));
  expectStandIn(await decide(unsigned), "WEBHOOK_ERROR", /not signed/);
  const otherKey = route((r) =>
    signedAnswer(body, String(r.headers["webhook-id"]), { key: newSigningSecret() }),
  );
  expectStandIn(await decide(otherKey), "WEBHOOK_ERROR", /does not match/);
  const tampered = route((r) => ({
    ...signedAnswer(body, String(r.headers["webhook-id"])),
    body: '{"decision":"DECLINE"}',
  }));
  expectStandIn(await decide(tampered), "WEBHOOK_ERROR", /does not match/);
  // The request's own signature echoed back does not sign the answer: it is over another body.
  const echoed = route((r) => ({
    status: 200,
    headers: {
      "webhook-id": String(r.headers["webhook-id"]),
      "webhook-timestamp": String(r.headers["webhook-timestamp"]),
      "webhook-signature": String(r.headers["webhook-signature"]),
    },
    body,
  }));
  expectStandIn(await decide(echoed), "WEBHOOK_ERROR", /does not match/);
  const otherId = route(() => signedAnswer(body, "another-authorization"));
  expectStandIn(await decide(otherId), "WEBHOOK_ERROR", /webhook-id is not the request's/);
  const stale = route((r) =>
    signedAnswer(body, String(r.headers["webhook-id"]), { timestamp: Math.floor(Date.now() / 1000) - 301 }),
  );
  expectStandIn(await decide(stale), "WEBHOOK_ERROR", /more than 300 s/);
  const notSeconds = route((r) => ({
    ...signedAnswer(body, String(r.headers["webhook-id"])),
    headers: {
      "webhook-id": String(r.headers["webhook-id"]),
      "webhook-timestamp": "soon",
      "webhook-signature": "v1,x",
    },
  }));
  expectStandIn(await decide(notSeconds), "WEBHOOK_ERROR", /not Unix seconds/);
});

test("another status, and a redirect, which is not followed: WEBHOOK_ERROR", async () => {
  const failing = route((r) =>
    signedAnswer('{"decision":"APPROVE"}', String(r.headers["webhook-id"]), { status: 500 }),
  );
  expectStandIn(await decide(failing), "WEBHOOK_ERROR", /^HTTP 500$/);
  const target = approve();
  const redirect = route(() => ({ status: 302, headers: { location: `${base}${target}` }, body: "" }));
  expectStandIn(await decide(redirect), "WEBHOOK_ERROR", /HTTP 302 \(redirects are not followed\)/);
  assert.ok(!received.some((r) => r.path === target), "the redirect was followed");
});

test("an answer larger than the limit is WEBHOOK_ERROR, with or without Content-Length", async () => {
  const big = JSON.stringify({
    decision: "APPROVE",
    padding: "x".repeat(limits.authorizationDecisionAnswerBytesMax),
  });
  const declared = route((r) => signedAnswer(big, String(r.headers["webhook-id"])));
  expectStandIn(await decide(declared), "WEBHOOK_ERROR", /larger than 16384 bytes/);
  const chunked = `/chunked-${++serial}`;
  handlers.set(chunked, (r, response) => {
    const answer = signedAnswer(big, String(r.headers["webhook-id"]));
    response.writeHead(200, answer.headers);
    for (let at = 0; at < big.length; at += 1024) response.write(big.slice(at, at + 1024));
    response.end();
  });
  expectStandIn(await decide(chunked), "WEBHOOK_ERROR", /larger than 16384 bytes/);
});

test("a retired secret still in its grace signs the request and may sign the answer", async () => {
  const retired = newSigningSecret();
  const path = route((r) =>
    signedAnswer('{"decision":"APPROVE"}', String(r.headers["webhook-id"]), { key: retired }),
  );
  const request = authorization();
  assert.deepEqual(await decide(path, request, { retiredSecrets: [retired] }), { kind: "APPROVE" });
  const sent = received.find((r) => r.path === path);
  const header = String(sent?.headers["webhook-signature"]);
  assert.equal(header.split(" ").length, 2);
  const signed = {
    id: request.authorizationId,
    timestamp: String(sent?.headers["webhook-timestamp"]),
    body: sent?.body ?? "",
  };
  assert.ok(hasValidSignature([secret], signed, header) && hasValidSignature([retired], signed, header));
});

test("URL rules at call time: outside sandbox no http, and no name that resolves to a local address", async () => {
  expectStandIn(
    await requestDecision({ url: `${base}/x`, timeoutMs: 500, secret }, authorization(), { sandbox: false }),
    "WEBHOOK_ERROR",
    /not called: url: must be https/,
  );
  const port = new URL(base).port;
  const resolve = async () => [{ address: "127.0.0.1", family: 4 }];
  expectStandIn(
    await requestDecision(
      { url: `https://decide.example.mx:${port}/x`, timeoutMs: 500, secret },
      authorization(),
      {
        sandbox: false,
        resolve,
      },
    ),
    "WEBHOOK_ERROR",
    /not called: decide\.example\.mx resolves to a local or private address/,
  );
});

test("outcomes are counted and every call's duration reported; connections are kept between calls", async () => {
  const calls = decisionCallCounter();
  const seconds: number[] = [];
  const options = { sandbox: true, calls, observeSeconds: (s: number) => seconds.push(s) };
  const endpoint = (path: string, timeoutMs = 2_000) => ({ url: `${base}${path}`, timeoutMs, secret });
  const approved = approve();
  const first = await requestDecision(endpoint(approved), authorization(), options);
  const second = await requestDecision(endpoint(approved), authorization(), options);
  assert.deepEqual([first.kind, second.kind], ["APPROVE", "APPROVE"]);
  const [one, two] = received.filter((r) => r.path === approved);
  assert.equal(one?.socket, two?.socket, "the second call opened a new connection");
  const declined = route((r) => signedAnswer('{"decision":"DECLINE"}', String(r.headers["webhook-id"])));
  await requestDecision(endpoint(declined), authorization(), options);
  await requestDecision(endpoint(`/nowhere-${++serial}`), authorization(), options);
  const slow = `/slow-${++serial}`;
  handlers.set(slow, () => {});
  await requestDecision(endpoint(slow, 100), authorization(), options);
  const values = Object.fromEntries((await calls.get()).values.map((v) => [v.labels.outcome, v.value]));
  assert.deepEqual(values, { approved: 2, declined: 1, timeout: 1, error: 1 });
  assert.equal(seconds.length, 5);
  assert.ok(seconds.every((s) => s >= 0 && s < 3));
  assert.ok((seconds[4] ?? 0) >= 0.09, "the timed-out call reported less than its timeout");
});
