import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import { performance } from "node:perf_hooks";
import { maskCardNumbers } from "../../domain/luhn.ts";
import { AppError } from "../../errors.ts";
import { limits } from "../../limits.ts";
import { characterCount, firstCharacters } from "../../text.ts";
import type { MerchantType } from "../purchases/schemas.ts";
import {
  type Answer,
  AnswerTooLarge,
  exchange,
  LocalAddressRefused,
  type Resolve,
  resolveByDns,
} from "../webhooks/post.ts";
import { hasValidSignature, signedHeaders } from "../webhooks/signature.ts";
import { checkWebhookUrl, isSandboxLocal } from "../webhooks/url.ts";
import type { DecisionCallCounter, DecisionOutcome } from "./metrics.ts";

/**
 * The call to a client's authorization decision endpoint: the authorization POSTed as JSON,
 * signed as webhooks are (Standard Webhooks), and the client's answer, which must be signed the
 * same way with the same secret, over its own body, with the request's webhook-id. Anything else
 * that comes back (nothing in time, a refused connection, another status, an unsigned, stale or
 * wrongly signed answer, a body that breaks the rules) is a stand-in: WEBHOOK_TIMEOUT or
 * WEBHOOK_ERROR, with a detail for the client. No database here; it never throws.
 */
export interface DecisionEndpoint {
  url: string;
  timeoutMs: number;
  /** Signs the request; the answer may be signed with it or with a retired one still in its grace. */
  secret: string;
  retiredSecrets?: readonly string[];
}

/** The authorization as the client sees it. Amounts in MXN centavos; merchant's in its currency's minor units. */
export interface DecisionRequest {
  authorizationId: string;
  cardId: string;
  clientId: string;
  cardholderId: string | null;
  amountCents: bigint;
  /** ISO 4217 numeric of the merchant's currency ("484" for MXN). */
  currency: string;
  merchantAmount: bigint;
  merchant: MerchantType;
  channel: string;
  partialAllowed: boolean;
  createdAt: Date;
}

/** What the client returned along with its decision: at most 20 string keys to string values. */
export type DecisionMetadata = Readonly<Record<string, string>>;

export type StandInReason = "WEBHOOK_TIMEOUT" | "WEBHOOK_ERROR";

export type DecisionResult =
  | { kind: "APPROVE"; amountCents?: bigint; metadata?: DecisionMetadata }
  | { kind: "DECLINE"; reason: string; metadata?: DecisionMetadata }
  | { kind: "STAND_IN"; reason: StandInReason; detail: string };

export interface DecisionOptions {
  /** Whether sandbox URLs (http://localhost, http://127.0.0.1) may be called. */
  sandbox: boolean;
  /** How host names are resolved (the system's resolver unless given). */
  resolve?: Resolve;
  /** The call's duration, stand-ins included (the latency histogram the caller keeps). */
  observeSeconds?: (seconds: number) => void;
  calls?: DecisionCallCounter;
  /** Emisor's clock in Unix milliseconds, for the timestamps (Date.now unless given). */
  now?: () => number;
}

export const decisionRequestType = "card_authorization.request";

/** The reason of a DECLINE that gives none. */
export const defaultDeclineReason = "CLIENT_DECLINED";

const reasonPattern = new RegExp(`^[A-Z0-9_]{1,${limits.authorizationDecisionReasonLengthMax}}$`);
// A key starts with a letter: "__proto__" is not one, whatever a reader of the metadata does with it.
const metadataKeyPattern = new RegExp(
  `^[A-Za-z][A-Za-z0-9_.-]{0,${limits.authorizationDecisionMetadataKeyLengthMax - 1}}$`,
);
// jsonb cannot hold either (a NUL, or half of a surrogate pair).
const unpairedSurrogate = /\p{Cs}/u;
const unstorable = (text: string) => text.includes("\u0000") || unpairedSurrogate.test(text);

/**
 * Connections kept open per endpoint: a call per authorization would otherwise pay a connection
 * (and a TLS handshake) each time. Each is made through `exchange`'s checked name lookup, so a
 * kept connection is to an address that was checked.
 */
const agentOptions = {
  keepAlive: true,
  maxSockets: limits.authorizationDecisionSocketsPerHostMax,
  maxFreeSockets: limits.authorizationDecisionSocketsPerHostMax,
  timeout: limits.authorizationDecisionIdleSocketMs,
  scheduling: "lifo" as const,
};
const agents = { http: new HttpAgent(agentOptions), https: new HttpsAgent(agentOptions) };

/** The JSON the endpoint receives. */
export function decisionRequestBody(request: DecisionRequest): string {
  return JSON.stringify({
    type: decisionRequestType,
    authorization: {
      id: request.authorizationId,
      card_id: request.cardId,
      client_id: request.clientId,
      cardholder_id: request.cardholderId,
      amount_cents: Number(request.amountCents),
      currency: request.currency,
      merchant_amount: Number(request.merchantAmount),
      merchant: request.merchant,
      channel: request.channel,
      partial_allowed: request.partialAllowed,
      created_at: request.createdAt.toISOString(),
    },
  });
}

/**
 * Asks the endpoint to decide, waiting at most its timeout (name lookup and connection
 * included). Counts the outcome and reports the duration when the options ask for them.
 */
export async function requestDecision(
  endpoint: DecisionEndpoint,
  request: DecisionRequest,
  options: DecisionOptions,
): Promise<DecisionResult> {
  const started = performance.now();
  const signal = AbortSignal.timeout(endpoint.timeoutMs);
  let result: DecisionResult;
  try {
    result = await callEndpoint(endpoint, request, options, signal);
  } catch (error) {
    result = standInFor(error, signal, endpoint.timeoutMs);
  }
  options.observeSeconds?.((performance.now() - started) / 1000);
  options.calls?.inc({ outcome: outcomeOf(result) });
  return result;
}

async function callEndpoint(
  endpoint: DecisionEndpoint,
  request: DecisionRequest,
  options: DecisionOptions,
  signal: AbortSignal,
): Promise<DecisionResult> {
  // Checked at every call by today's rules, as webhook deliveries are: an endpoint registered in
  // sandbox is not called once the service runs outside it.
  const url = checkWebhookUrl(endpoint.url, options.sandbox);
  const target = new URL(url);
  const now = options.now ?? Date.now;
  const body = decisionRequestBody(request);
  const secrets = [endpoint.secret, ...(endpoint.retiredSecrets ?? [])];
  const signed = signedHeaders(secrets, request.authorizationId, Math.floor(now() / 1000), body);
  const answer = await exchange(url, {
    headers: {
      ...signed,
      // The authorization's id: the same on any repeat of the call, so the client decides once.
      "idempotency-key": request.authorizationId,
      "content-type": "application/json",
      accept: "application/json",
      "user-agent": "Emisor-Authorizations/1",
    },
    body,
    signal,
    resolve: options.resolve ?? resolveByDns,
    allowLocal: isSandboxLocal(target, options.sandbox),
    answerBytesMax: limits.authorizationDecisionAnswerBytesMax,
    agent: target.protocol === "https:" ? agents.https : agents.http,
  });
  return judgeAnswer(answer, request, secrets, now());
}

function standIn(reason: StandInReason, detail: string): DecisionResult {
  return {
    kind: "STAND_IN",
    reason,
    detail: firstCharacters(detail, limits.authorizationDecisionDetailLengthMax),
  };
}

/** Why a call that threw stands in: the clock first (an aborted call fails in many ways). */
function standInFor(error: unknown, signal: AbortSignal, timeoutMs: number): DecisionResult {
  if (signal.aborted) return standIn("WEBHOOK_TIMEOUT", `no answer within ${timeoutMs} ms`);
  if (error instanceof AppError || error instanceof LocalAddressRefused)
    return standIn("WEBHOOK_ERROR", `not called: ${error.message}`);
  if (error instanceof AnswerTooLarge) return standIn("WEBHOOK_ERROR", error.message);
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code === "string") return standIn("WEBHOOK_ERROR", `connection failed: ${code}`);
  const message = error instanceof Error ? error.message : String(error);
  return standIn("WEBHOOK_ERROR", `the call failed: ${message}`);
}

function outcomeOf(result: DecisionResult): DecisionOutcome {
  if (result.kind === "APPROVE") return "approved";
  if (result.kind === "DECLINE") return "declined";
  return result.reason === "WEBHOOK_TIMEOUT" ? "timeout" : "error";
}

/** The decision an answer holds, once its status and signature are what they must be. */
export function judgeAnswer(
  answer: Answer,
  request: Pick<DecisionRequest, "authorizationId" | "amountCents" | "partialAllowed">,
  secrets: readonly string[],
  nowMs: number,
): DecisionResult {
  if (answer.status < 200 || answer.status >= 300) {
    const redirect = answer.status >= 300 && answer.status < 400 ? " (redirects are not followed)" : "";
    return standIn("WEBHOOK_ERROR", `HTTP ${answer.status}${redirect}`);
  }
  const problem = signatureProblem(answer, request.authorizationId, secrets, nowMs);
  if (problem !== null) return standIn("WEBHOOK_ERROR", problem);
  return parseDecision(answer.body, request);
}

function headerOf(answer: Answer, name: string): string | undefined {
  const value = answer.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function signatureProblem(
  answer: Answer,
  id: string,
  secrets: readonly string[],
  nowMs: number,
): string | null {
  const answerId = headerOf(answer, "webhook-id");
  const timestamp = headerOf(answer, "webhook-timestamp");
  const signature = headerOf(answer, "webhook-signature");
  if (!answerId || !timestamp || !signature)
    return "the answer is not signed: webhook-id, webhook-timestamp and webhook-signature are required";
  if (answerId !== id) return "the answer's webhook-id is not the request's";
  if (!/^[0-9]{1,12}$/.test(timestamp)) return "the answer's webhook-timestamp is not Unix seconds";
  const tolerance = limits.authorizationDecisionToleranceSeconds;
  if (Math.abs(nowMs / 1000 - Number(timestamp)) > tolerance)
    return `the answer's webhook-timestamp is more than ${tolerance} s from Emisor's clock`;
  if (!hasValidSignature(secrets, { id, timestamp, body: answer.body }, signature))
    return "the answer's webhook-signature does not match its body under the endpoint's secret";
  return null;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const malformed = (problem: string) => standIn("WEBHOOK_ERROR", `malformed answer: ${problem}`);

/**
 * The answer's body: {"decision": "APPROVE", "amount_cents"?, "metadata"?} or {"decision":
 * "DECLINE", "reason"?, "metadata"?}; null stands for an absent field. Any other field is refused
 * rather than ignored: a misspelt "amount_cent" must not approve the whole amount.
 */
export function parseDecision(
  body: Buffer,
  request: Pick<DecisionRequest, "amountCents" | "partialAllowed">,
): DecisionResult {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch {
    return malformed("the body is not JSON");
  }
  if (!isObject(parsed)) return malformed("the body must be a JSON object");
  const { decision, amount_cents: amount, reason, metadata, ...rest } = parsed;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined)
    return malformed(/^[A-Za-z0-9_]{1,40}$/.test(unknown) ? `unknown field ${unknown}` : "an unknown field");
  const kept = parseMetadata(metadata ?? undefined);
  if (typeof kept === "string") return malformed(kept);
  const extra = kept ? { metadata: kept } : {};
  if (decision === "DECLINE") {
    if ((amount ?? undefined) !== undefined) return malformed("amount_cents is for APPROVE only");
    const why = reason ?? defaultDeclineReason;
    if (typeof why !== "string" || !reasonPattern.test(why))
      return malformed(`reason must match ${reasonPattern.source}`);
    return { kind: "DECLINE", reason: why, ...extra };
  }
  if (decision === "APPROVE") {
    if ((reason ?? undefined) !== undefined) return malformed("reason is for DECLINE only");
    const approved = parseAmount(amount ?? undefined, request);
    if (typeof approved === "string") return malformed(approved);
    return { kind: "APPROVE", ...(approved === undefined ? {} : { amountCents: approved }), ...extra };
  }
  return malformed('decision must be "APPROVE" or "DECLINE"');
}

/** The amount approved: a positive integer of centavos, at most what was asked, less only with partial approval. */
function parseAmount(
  value: unknown,
  request: Pick<DecisionRequest, "amountCents" | "partialAllowed">,
): bigint | undefined | string {
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value <= 0)
    return "amount_cents must be a positive integer of MXN centavos";
  const approved = BigInt(value);
  if (approved > request.amountCents) return "amount_cents is more than the authorization asks";
  if (approved < request.amountCents && !request.partialAllowed)
    return "amount_cents is less than asked, and this authorization does not allow partial approval";
  return approved;
}

/** The metadata kept on the authorization, card numbers in it masked; a string says what is wrong. */
function parseMetadata(value: unknown): DecisionMetadata | undefined | string {
  if (value === undefined) return undefined;
  if (!isObject(value)) return "metadata must be an object of strings";
  const entries = Object.entries(value);
  const valueMax = limits.authorizationDecisionMetadataValueLengthMax;
  if (entries.length > limits.authorizationDecisionMetadataEntriesMax)
    return `metadata holds more than ${limits.authorizationDecisionMetadataEntriesMax} entries`;
  for (const [key, text] of entries) {
    if (!metadataKeyPattern.test(key)) return `metadata keys must match ${metadataKeyPattern.source}`;
    if (typeof text !== "string") return "metadata values must be strings";
    if (text.length > valueMax && characterCount(text) > valueMax)
      return `metadata values must be at most ${valueMax} characters`;
    if (unstorable(text)) return "metadata values must not hold NUL or unpaired surrogates";
  }
  return Object.freeze(
    Object.fromEntries(entries.map(([key, text]) => [key, maskCardNumbers(String(text))])),
  );
}
