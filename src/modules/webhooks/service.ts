import { randomUUID } from "node:crypto";
import { seal } from "../../crypto/vault.ts";
import type { Db } from "../../db/database.ts";
import type { DeliveryStatus, WebhookStatus } from "../../db/schema.ts";
import { AppError, errors, invalidField } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import type { IdempotentResult } from "../../idempotency/reply.ts";
import { runIdempotent } from "../../idempotency/run.ts";
import type { IdempotencyScope } from "../../idempotency/store.ts";
import { timeOrderedUuid } from "../../ledger/ids.ts";
import { limits } from "../../limits.ts";
import { findClientInScope } from "../clients/repository.ts";
import { testEventType } from "../events/outbox.ts";
import { findEventInScope, insertTestEvent } from "../events/repository.ts";
import { presentEvent } from "../events/service.ts";
import * as repo from "./repository.ts";
import { newSigningSecret, secretContext } from "./signature.ts";
import { checkWebhookUrl } from "./url.ts";

/**
 * Webhook endpoints: a client registers URLs for the event types it wants. An endpoint belongs
 * to one client; the caller manages the endpoints of its subtree (tenancy), and anything else is
 * 3701. The signing secret is shown once, at creation or rotation, and stored sealed.
 */
export interface WebhookDeps {
  db: Db;
  /** Seals signing secrets at rest (the vault key of the key ring). */
  vaultKey: Buffer;
  /** Sandbox mode also accepts http://localhost and http://127.0.0.1 URLs. */
  sandbox: boolean;
}

/** "*" stands for every event type, including types added later. */
export const allEventTypes = "*";

export interface WebhookView {
  id: string;
  client_id: string;
  url: string;
  description: string | null;
  event_types: string[];
  include_subclients: boolean;
  status: WebhookStatus;
  disabled_reason: string | null;
  disabled_at: string | null;
  failure_streak: number;
  last_success_at: string | null;
  last_failure_at: string | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

export interface DeliveryView {
  id: string;
  event_id: string;
  event_type: string;
  kind: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: string | null;
  last_attempt_at: string | null;
  last_status_code: number | null;
  last_error: string | null;
  delivered_at: string | null;
  created_at: string;
}

const iso = (date: Date | null) => (date ? date.toISOString() : null);

export function presentWebhook(row: repo.EndpointRow): WebhookView {
  return {
    id: row.id,
    client_id: row.client_id,
    url: row.url,
    description: row.description,
    event_types: row.event_types ?? [allEventTypes],
    include_subclients: row.include_subclients,
    status: row.status,
    disabled_reason: row.disabled_reason,
    disabled_at: iso(row.disabled_at),
    failure_streak: row.failure_streak,
    last_success_at: iso(row.last_success_at),
    last_failure_at: iso(row.last_failure_at),
    last_error: row.last_error,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export function presentDelivery(row: repo.DeliveryRow): DeliveryView {
  return {
    id: row.id,
    event_id: row.event_id,
    event_type: row.event_type,
    kind: row.kind,
    status: row.status,
    attempts: row.attempts,
    next_attempt_at: row.status === "PENDING" ? row.next_attempt_at.toISOString() : null,
    last_attempt_at: iso(row.last_attempt_at),
    last_status_code: row.last_status_code,
    last_error: row.last_error,
    delivered_at: iso(row.delivered_at),
    created_at: row.created_at.toISOString(),
  };
}

export interface CreateWebhookInput {
  url: string;
  event_types?: string[] | undefined;
  description?: string | undefined;
  include_subclients?: boolean | undefined;
  client_id?: string | undefined;
}

/** null (every type) for ["*"] or nothing; "*" beside named types is a contradiction. */
function subscribedTypes(types: string[] | undefined): string[] | null {
  if (types === undefined) return null;
  if (!types.includes(allEventTypes)) return types;
  if (types.length > 1)
    throw invalidField("event_types", "x-all", `"${allEventTypes}" must be the only value`);
  return null;
}

/** The replay of a creation: the same endpoint, without the secret (never stored in clear). */
function withoutSecret(data: { webhook: Record<string, unknown> }) {
  return { webhook: { ...data.webhook, secret: null } };
}

async function ownerInScope(db: Db, caller: Caller, clientId: string | undefined): Promise<string> {
  if (clientId === undefined || clientId === caller.clientId) return caller.clientId;
  if (!(await findClientInScope(db, caller.clientId, clientId))) throw new AppError(errors.clientNotFound);
  return clientId;
}

export async function createWebhook(
  deps: WebhookDeps,
  caller: Caller,
  input: CreateWebhookInput,
  idempotency: IdempotencyScope | undefined,
): Promise<IdempotentResult> {
  const url = checkWebhookUrl(input.url, deps.sandbox);
  const eventTypes = subscribedTypes(input.event_types);
  const clientId = await ownerInScope(deps.db, caller, input.client_id);
  return runIdempotent(
    deps.db,
    idempotency,
    async (tx) => {
      await repo.lockClientEndpoints(tx, clientId);
      if ((await repo.countEndpoints(tx, clientId)) >= limits.webhookEndpointsPerClientMax)
        throw new AppError(errors.webhookLimitReached);
      const id = randomUUID();
      const secret = newSigningSecret();
      await repo.insertEndpoint(tx, {
        id,
        clientId,
        url,
        description: input.description ?? null,
        eventTypes,
        includeSubclients: input.include_subclients ?? false,
        secretSealed: seal(deps.vaultKey, secret, secretContext(id)),
      });
      const row = await repo.findEndpointInScope(tx, caller.clientId, id);
      if (!row) throw new Error("a webhook endpoint vanished inside its own transaction");
      return { webhook: { ...presentWebhook(row), secret } };
    },
    { stored: withoutSecret },
  );
}

export async function listWebhooks(
  db: Db,
  caller: Caller,
  query: { client_id?: string | undefined; page: number; per_page: number },
) {
  if (query.client_id) await ownerInScope(db, caller, query.client_id);
  const { rows, total } = await repo.listEndpointsInScope(db, {
    scopeClientId: caller.clientId,
    clientId: query.client_id,
    offset: (query.page - 1) * query.per_page,
    limit: query.per_page,
  });
  return {
    webhooks: rows.map(presentWebhook),
    page: query.page,
    pages: Math.ceil(total / query.per_page),
    total,
  };
}

async function endpointInScope(db: Db, caller: Caller, id: string): Promise<repo.EndpointRow> {
  const row = await repo.findEndpointInScope(db, caller.clientId, id);
  if (!row) throw new AppError(errors.webhookNotFound);
  return row;
}

/** The endpoint's state (why it was disabled, its failure streak) and its latest deliveries. */
export async function getWebhook(db: Db, caller: Caller, id: string) {
  const row = await endpointInScope(db, caller, id);
  const deliveries = await repo.recentDeliveries(db, id, limits.webhookRecentDeliveriesMax);
  return { webhook: presentWebhook(row), recent_deliveries: deliveries.map(presentDelivery) };
}

/** Deletes the endpoint and its deliveries; nothing more is sent to it. */
export async function deleteWebhook(db: Db, caller: Caller, id: string) {
  await endpointInScope(db, caller, id);
  await repo.deleteEndpoint(db, id);
  return { webhook: { id, deleted: true } };
}

/** Enables a disabled endpoint: deliveries start again with the events written from now on. */
export async function enableWebhook(db: Db, caller: Caller, id: string) {
  await endpointInScope(db, caller, id);
  await repo.enableEndpoint(db, id);
  return { webhook: presentWebhook(await endpointInScope(db, caller, id)) };
}

/**
 * A new signing secret, shown once. The one it replaces keeps signing too (one more signature in
 * webhook-signature) for the grace period, so a receiver can switch without losing a delivery;
 * secrets retired by earlier rotations keep signing until their own expiry.
 */
export async function rotateWebhookSecret(
  deps: WebhookDeps,
  caller: Caller,
  id: string,
  idempotency: IdempotencyScope | undefined,
): Promise<IdempotentResult> {
  await endpointInScope(deps.db, caller, id);
  return runIdempotent(
    deps.db,
    idempotency,
    async (tx) => {
      const locked = await repo.lockEndpoint(tx, id);
      if (!locked) throw new AppError(errors.webhookNotFound);
      const secret = newSigningSecret();
      const previousExpiresAt = new Date(Date.now() + limits.webhookSecretRotationGraceHours * 3600_000);
      const sealed = seal(deps.vaultKey, secret, secretContext(id));
      await repo.rotateSecret(tx, locked, sealed, previousExpiresAt, limits.webhookRetiredSecretsMax);
      const row = await repo.findEndpointInScope(tx, caller.clientId, id);
      if (!row) throw new Error("a webhook endpoint vanished inside its own transaction");
      const data = {
        webhook: presentWebhook(row),
        secret,
        previous_secret_expires_at: previousExpiresAt.toISOString(),
      };
      return data;
    },
    // A replay says the rotation happened (once) but cannot show the secret again: it is not stored.
    { stored: (data) => ({ ...data, secret: null }) },
  );
}

async function enabledEndpointInScope(db: Db, caller: Caller, id: string): Promise<repo.EndpointRow> {
  const row = await endpointInScope(db, caller, id);
  if (row.status !== "ENABLED") throw new AppError(errors.webhookDisabled);
  return row;
}

/** Writes a `webhook.test` event of the endpoint's owner and queues it to this endpoint only. */
export async function sendTestEvent(
  db: Db,
  caller: Caller,
  id: string,
  idempotency: IdempotencyScope | undefined,
): Promise<IdempotentResult> {
  const endpoint = await enabledEndpointInScope(db, caller, id);
  return runIdempotent(db, idempotency, async (tx) => {
    const eventId = timeOrderedUuid();
    await insertTestEvent(tx, {
      id: eventId,
      type: testEventType,
      clientId: endpoint.client_id,
      data: { webhook: { id: endpoint.id, url: endpoint.url }, message: "A test event sent on request" },
    });
    const event = await findEventInScope(tx, endpoint.client_id, eventId);
    if (!event) throw new Error("a test event vanished inside its own transaction");
    const delivery = await repo.insertDelivery(tx, { eventId, endpointId: endpoint.id, kind: "TEST" });
    return { event: presentEvent(event), delivery: presentDelivery(delivery) };
  });
}

/**
 * Sends an event again to an endpoint, with its original webhook-id. Only events the endpoint's
 * owner may see (its own and its descendants'); any other is 3702, as if it did not exist.
 */
export async function replayEvent(
  db: Db,
  caller: Caller,
  id: string,
  eventId: string,
  idempotency: IdempotencyScope | undefined,
): Promise<IdempotentResult> {
  const endpoint = await endpointInScope(db, caller, id);
  if (!(await findEventInScope(db, endpoint.client_id, eventId))) throw new AppError(errors.eventNotFound);
  await enabledEndpointInScope(db, caller, id);
  return runIdempotent(db, idempotency, async (tx) => {
    const delivery = await repo.insertDelivery(tx, { eventId, endpointId: endpoint.id, kind: "REPLAY" });
    return { delivery: presentDelivery(delivery) };
  });
}
