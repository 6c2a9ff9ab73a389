import { open, seal } from "../../crypto/vault.ts";
import type { Db, Queryable } from "../../db/database.ts";
import type { StandIn } from "../../db/schema.ts";
import { AppError, errors } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import type { IdempotentResult } from "../../idempotency/reply.ts";
import { runIdempotent } from "../../idempotency/run.ts";
import type { IdempotencyScope } from "../../idempotency/store.ts";
import { limits } from "../../limits.ts";
import { newSigningSecret } from "../webhooks/signature.ts";
import { checkWebhookUrl } from "../webhooks/url.ts";
import * as repo from "./repository.ts";

/**
 * A client's authorization decision endpoint: one per client, managed by that client only (a
 * parent does not register, change or remove a sub-client's, nor a sub-client its parent's). A
 * client without one inherits its nearest ancestor's. The signing secret is shown once, at first
 * registration or a rotation, and stored sealed.
 */
export interface DecisionDeps {
  db: Db;
  /** Seals signing secrets at rest (the vault key of the key ring). */
  vaultKey: Buffer;
  /** Sandbox mode also accepts http://localhost and http://127.0.0.1 URLs, as webhooks do. */
  sandbox: boolean;
}

/** The AES-GCM associated data of an endpoint's sealed secrets: a secret only opens on its row. */
export const endpointSecretContext = (clientId: string) => `authorization-endpoint-secret:${clientId}`;

export interface EndpointView {
  client_id: string;
  inherited: boolean;
  url: string | null;
  timeout_ms: number;
  stand_in: StandIn;
  created_at: string;
  updated_at: string;
}

/**
 * An endpoint as `viewer` sees it. An inherited endpoint's URL is its owner's to see: the
 * viewer learns who decides its authorizations, in how long and what stands in, not where the
 * ancestor's service runs.
 */
export function presentEndpoint(row: repo.EndpointRow, viewerId: string): EndpointView {
  const inherited = row.client_id !== viewerId;
  return {
    client_id: row.client_id,
    inherited,
    url: inherited ? null : row.url,
    timeout_ms: row.timeout_ms,
    stand_in: row.stand_in,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export interface PutEndpointInput {
  url: string;
  timeout_ms?: number | undefined;
  stand_in?: StandIn | undefined;
}

/**
 * PUT: registers the caller's own endpoint or replaces it (fields left out take their defaults).
 * The secret is made outside the transaction and kept only when the row is new; a replacement
 * keeps the one the client stored.
 */
export async function putAuthorizationEndpoint(
  deps: DecisionDeps,
  caller: Caller,
  input: PutEndpointInput,
  idempotency: IdempotencyScope | undefined,
): Promise<IdempotentResult> {
  const url = checkWebhookUrl(input.url, deps.sandbox);
  const secret = newSigningSecret();
  const secretSealed = seal(deps.vaultKey, secret, endpointSecretContext(caller.clientId));
  return runIdempotent(
    deps.db,
    idempotency,
    async (tx) => {
      const { row, created } = await repo.upsertEndpoint(tx, {
        clientId: caller.clientId,
        url,
        timeoutMs: input.timeout_ms ?? limits.authorizationDecisionTimeoutMsDefault,
        standIn: input.stand_in ?? "DECLINE",
        secretSealed,
      });
      return {
        authorization_endpoint: { ...presentEndpoint(row, caller.clientId), secret: created ? secret : null },
      };
    },
    // A replay says what was registered but cannot show the secret again: it is not stored in clear.
    { stored: (data) => ({ authorization_endpoint: { ...data.authorization_endpoint, secret: null } }) },
  );
}

/** The endpoint that decides the caller's authorizations: its own, or the one it inherits. */
export async function getAuthorizationEndpoint(db: Queryable, caller: Caller) {
  const row = (await repo.findEffectiveEndpoints(db, [caller.clientId])).get(caller.clientId);
  if (!row) throw new AppError(errors.authorizationEndpointNotFound);
  return { authorization_endpoint: presentEndpoint(row, caller.clientId) };
}

/** Removes the caller's own endpoint: from then on it inherits its nearest ancestor's, if any. */
export async function deleteAuthorizationEndpoint(db: Queryable, caller: Caller) {
  if (!(await repo.deleteEndpoint(db, caller.clientId)))
    throw new AppError(errors.ownAuthorizationEndpointNotFound);
  return { authorization_endpoint: { client_id: caller.clientId, deleted: true } };
}

/**
 * A new signing secret, shown once. The one it replaces keeps signing requests, and is accepted
 * on answers, for the grace period, so a client can deploy the new one without a stand-in.
 */
export async function rotateAuthorizationEndpointSecret(
  deps: DecisionDeps,
  caller: Caller,
  idempotency: IdempotencyScope | undefined,
): Promise<IdempotentResult> {
  const secret = newSigningSecret();
  const secretSealed = seal(deps.vaultKey, secret, endpointSecretContext(caller.clientId));
  return runIdempotent(
    deps.db,
    idempotency,
    async (tx) => {
      const locked = await repo.lockOwnEndpoint(tx, caller.clientId);
      if (!locked) throw new AppError(errors.ownAuthorizationEndpointNotFound);
      const previousExpiresAt = new Date(
        Date.now() + limits.authorizationEndpointSecretGraceHours * 3600_000,
      );
      const row = await repo.rotateSecret(
        tx,
        locked,
        secretSealed,
        previousExpiresAt,
        limits.authorizationEndpointRetiredSecretsMax,
      );
      return {
        authorization_endpoint: presentEndpoint(row, caller.clientId),
        secret,
        previous_secret_expires_at: previousExpiresAt.toISOString(),
      };
    },
    { stored: (data) => ({ ...data, secret: null }) },
  );
}

/** What the authorization path needs to call a client's endpoint (requestDecision in call.ts). */
export interface EffectiveEndpoint {
  /** The client whose endpoint it is: the client itself, or the ancestor it inherits from. */
  ownerClientId: string;
  url: string;
  timeoutMs: number;
  standIn: StandIn;
  secret: string;
  /** Secrets a rotation replaced that are still in their grace period, newest last. */
  retiredSecrets: string[];
}

function opened(vaultKey: Buffer, row: repo.SealedEndpointRow, nowMs: number): EffectiveEndpoint {
  const context = endpointSecretContext(row.client_id);
  return {
    ownerClientId: row.client_id,
    url: row.url,
    timeoutMs: row.timeout_ms,
    standIn: row.stand_in,
    secret: open(vaultKey, row.secret_sealed, context),
    retiredSecrets: row.retired_secrets
      .filter((retired) => Date.parse(retired.expires_at) > nowMs)
      .map((retired) => open(vaultKey, retired.sealed, context)),
  };
}

/**
 * The endpoint that decides each client's authorizations (its own or its nearest ancestor's),
 * with its secrets opened, in one statement; clients with none are absent. For a batch of
 * authorizations of several clients.
 */
export async function effectiveEndpoints(
  db: Queryable,
  vaultKey: Buffer,
  clientIds: readonly string[],
): Promise<Map<string, EffectiveEndpoint>> {
  const rows = await repo.findEffectiveEndpoints(db, clientIds);
  const now = Date.now();
  return new Map([...rows].map(([clientId, row]) => [clientId, opened(vaultKey, row, now)]));
}

/** The endpoint that decides the client's authorizations, or null: one statement over its lineage. */
export async function effectiveEndpoint(
  db: Queryable,
  vaultKey: Buffer,
  clientId: string,
): Promise<EffectiveEndpoint | null> {
  return (await effectiveEndpoints(db, vaultKey, [clientId])).get(clientId) ?? null;
}
