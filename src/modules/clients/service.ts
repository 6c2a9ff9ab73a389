import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { defaultClabeBankPrefix } from "../../config.ts";
import { hashSecret, randomString } from "../../crypto/secrets.ts";
import type { Db, Tx } from "../../db/database.ts";
import { violatedUniqueConstraint } from "../../db/unique.ts";
import { isValidRfc } from "../../domain/rfc.ts";
import { AppError, errors, invalidField } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import type { IdempotentResult } from "../../idempotency/reply.ts";
import { runIdempotent } from "../../idempotency/run.ts";
import type { IdempotencyScope } from "../../idempotency/store.ts";
import { systemAccounts } from "../../ledger/accounts.ts";
import { createAccount, postEntry } from "../../ledger/ledger.ts";
import { type Cents, parsePesos, toPesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import { emitEvent } from "../events/outbox.ts";
import { addressValues } from "../shared/address.ts";
import { createCollectionAccount } from "../transfers/service.ts";
import * as repo from "./repository.ts";
import type { CreateClientBody } from "./schemas.ts";

export interface NewApiKey {
  id: string;
  /** The identifier sent at login. */
  key: string;
  /** Shown once; only its scrypt hash is stored. */
  password: string;
}

/** A new API key identifier: a prefix that says what it is, then 24 random characters. */
export function newApiKeyIdentifier(): string {
  return `ek_${randomString(24)}`;
}

/**
 * Creates a root client (a tenant) with its main balance and one API key, optionally funded
 * from the sandbox funding account; everything in one transaction. Used by `emisor tenant
 * create` and by the first start of a sandbox.
 */
export async function createRootClient(
  db: Db,
  input: { name: string; alias: string; availableCents: Cents; password?: string; clabeBankPrefix?: string },
): Promise<{ clientId: string; code: string; apiKey: NewApiKey; clabe: string }> {
  const password = input.password ?? randomString(24);
  const passwordHash = await hashSecret(password);
  const clientId = randomUUID();
  const apiKey: NewApiKey = { id: randomUUID(), key: newApiKeyIdentifier(), password };
  const { code, clabe } = await db.transaction().execute(async (tx) => {
    const clientCode = await repo.insertClient(
      tx,
      { id: clientId, name: input.name, alias: input.alias },
      null,
    );
    await createAccount(tx, { id: clientId, kind: "CLIENT_MAIN", clientId });
    const collection = await createCollectionAccount(
      tx,
      clientId,
      input.clabeBankPrefix ?? defaultClabeBankPrefix,
    );
    await repo.insertApiKey(tx, {
      id: apiKey.id,
      clientId,
      key: apiKey.key,
      name: `${input.alias} key`,
      alias: input.alias,
      description: "Created with the tenant",
      passwordHash,
    });
    if (input.availableCents > 0n) await fundFromSandbox(tx, clientId, input.availableCents);
    return { code: clientCode, clabe: collection.clabe };
  });
  return { clientId, code, apiKey, clabe };
}

/** Moves money from the sandbox funding account to a client's main balance. */
export async function fundFromSandbox(tx: Tx, clientId: string, amountCents: Cents): Promise<string> {
  return postEntry(tx, {
    kind: "SANDBOX_FUNDING",
    description: "Sandbox funding",
    clientId,
    postings: [
      { accountId: systemAccounts.sandboxFunding, amountCents: -amountCents },
      { accountId: clientId, amountCents },
    ],
  });
}

/** Contract 2.7 without the login identifier: what the client.created event carries. */
type Subclient = {
  id: string;
  code: string;
  name: string;
  available: number;
  rfc: string;
  api_client: { id: string; name: string; alias: string; description: string };
};

/**
 * Creates a sub-client of the caller (contract 4.4) with its main balance and its API key, and
 * funds it from the caller's main balance with one balanced entry; all in one transaction, with
 * the client.created event. The caller's balance may not fall below its commercial minimum
 * (clients.min_balance_cents, contract 8.2). `available` may be 0: the client starts empty. The new
 * client gets its own collection CLABE (bank prefix `clabeBankPrefix`) in the same transaction.
 */
export async function createSubclient(
  db: Db,
  caller: Caller,
  body: CreateClientBody,
  idempotency: IdempotencyScope | undefined,
  clabeBankPrefix: string,
): Promise<IdempotentResult> {
  const availableCents = parsePesos(body.available, "available", {
    maxCents: limits.fundingCentsMax,
    allowZero: true,
  });
  const rfc = body.rfc.toUpperCase();
  if (!isValidRfc(rfc)) {
    throw invalidField(
      "rfc",
      "rfc",
      "must be an RFC: 3-4 letters, a real date YYMMDD, and an optional 3-character homoclave (required for a company's 3-letter RFC)",
    );
  }
  // scrypt is slow on purpose: hash before the transaction, not while holding the balance lock.
  const passwordHash = await hashSecret(body.api_key_password);
  return runIdempotent(db, idempotency, async (tx) => {
    const parent = await repo.lockFundingSource(tx, caller.clientId);
    assert.ok(parent, "an authenticated caller's client exists");
    if (parent.lineage.length >= limits.clientDepthMax) throw new AppError(errors.clientDepthExceeded);
    if (parent.balance_cents - availableCents < parent.min_balance_cents) {
      throw new AppError(errors.subclientFundingInsufficient);
    }
    // A taken alias is decided inside the work, so that it is the key's final answer too.
    const subclient = await insertSubclient(tx, parent, { ...body, rfc }, passwordHash).catch((error) => {
      if (violatedUniqueConstraint(error) === "clients_root_alias_uq")
        throw new AppError(errors.clientAliasTaken);
      throw error;
    });
    await createCollectionAccount(tx, subclient.id, clabeBankPrefix);
    if (availableCents > 0n) await fundSubclient(tx, caller.clientId, subclient.id, availableCents);
    const created = { ...subclient.data, available: toPesos(availableCents) };
    // The parent owns the new client: the event is the parent's, and carries no credential.
    await emitEvent(tx, { type: "client.created", clientId: caller.clientId, data: created });
    return { subclient: { ...created, api_client: { ...created.api_client, api_key: subclient.apiKey } } };
  });
}

/** The client row, its main ledger account and its API key. */
async function insertSubclient(
  tx: Tx,
  parent: repo.FundingSource,
  body: CreateClientBody,
  passwordHash: string,
): Promise<{ id: string; apiKey: string; data: Omit<Subclient, "available"> }> {
  const id = randomUUID();
  const code = await repo.insertClient(
    tx,
    {
      id,
      name: body.name,
      alias: body.alias,
      email: body.email,
      phone: body.phone,
      mobile_phone: body.mobile_phone,
      rfc: body.rfc,
      ...addressValues(body),
      contact: JSON.stringify(contactOf(body)),
      legal_representative: legalRepresentativeOf(body),
    },
    parent,
  );
  await createAccount(tx, { id, kind: "CLIENT_MAIN", clientId: id });
  const apiKey = { id: randomUUID(), key: newApiKeyIdentifier() };
  const description = body.api_key_description ?? null;
  await repo.insertApiKey(tx, {
    id: apiKey.id,
    clientId: id,
    key: apiKey.key,
    name: body.api_key_name,
    alias: body.alias,
    description,
    passwordHash,
  });
  return {
    id,
    apiKey: apiKey.key,
    data: {
      id,
      code,
      name: body.name,
      rfc: body.rfc,
      api_client: {
        id: apiKey.id,
        name: body.api_key_name,
        alias: body.alias,
        description: description ?? "",
      },
    },
  };
}

/** One balanced entry from the parent's main balance to the new client's. */
async function fundSubclient(tx: Tx, parentId: string, clientId: string, amountCents: Cents): Promise<void> {
  await postEntry(tx, {
    kind: "SUBCLIENT_FUNDING",
    description: "Initial balance of a new sub-client",
    clientId: parentId,
    metadata: { subclient_id: clientId },
    postings: [
      { accountId: parentId, amountCents: -amountCents },
      { accountId: clientId, amountCents },
    ],
  });
}

function contactOf(body: CreateClientBody) {
  return {
    name: body.contact_name,
    second_name: body.contact_second_name ?? null,
    surname: body.contact_surname,
    second_surname: body.contact_second_surname ?? null,
    email: body.contact_email,
    telephone_country_code: body.contact_telephone_country_code,
    telephone: body.contact_telephone,
    mobile_phone_country_code: body.contact_mobile_phone_country_code,
    mobile_phone: body.contact_mobile_phone,
  };
}

/** The legal representative's fields as one object, or null when none was sent. */
function legalRepresentativeOf(body: CreateClientBody): string | null {
  const representative = {
    name: body.legal_representative_name ?? null,
    second_name: body.legal_representative_second_name ?? null,
    surname: body.legal_representative_surname ?? null,
    second_surname: body.legal_representative_second_surname ?? null,
    email: body.legal_representative_email ?? null,
    telephone_country_code: body.legal_representative_telephone_country_code ?? null,
    telephone: body.legal_representative_telephone ?? null,
    mobile_phone_country_code: body.legal_representative_mobile_phone_country_code ?? null,
    mobile_phone: body.legal_representative_mobile_phone ?? null,
  };
  return Object.values(representative).some((value) => value !== null)
    ? JSON.stringify(representative)
    : null;
}

/** A client row as the read endpoints show it. */
function presentClient(row: repo.ClientListRow) {
  return {
    id: row.id,
    parent_id: row.parent_id,
    code: row.code,
    name: row.name,
    alias: row.alias,
    rfc: row.rfc,
    email: row.email,
    status: row.status,
    available: toPesos(row.balance_cents),
    min_balance: toPesos(row.min_balance_cents),
    created_at: row.created_at.toISOString(),
  };
}

/** GET /v1/clients/balance: the caller's main balance. */
export async function getBalance(db: Db, caller: Caller) {
  const client = await repo.findClientInScope(db, caller.clientId, caller.clientId);
  assert.ok(client, "an authenticated caller's client exists");
  return {
    balance: {
      client_id: client.id,
      available: toPesos(client.balance_cents),
      min_balance: toPesos(client.min_balance_cents),
      currency: { code: "484", description: "MXN" },
    },
  };
}

/** GET /v1/clients: the caller's direct sub-clients, paginated. */
export async function listSubclients(db: Db, caller: Caller, page: number, perPage: number) {
  const { total, rows } = await repo.listChildren(db, caller.clientId, {
    limit: perPage,
    offset: (page - 1) * perPage,
  });
  return { clients: { items: rows.map(presentClient), page, pages: Math.ceil(total / perPage), total } };
}

/** GET /v1/clients/{id}: the caller itself or any client of its subtree; anything else is 3101. */
export async function getClient(db: Db, caller: Caller, id: string) {
  const client = await repo.findClientInScope(db, caller.clientId, id);
  if (!client) throw new AppError(errors.clientNotFound);
  return { client: presentClient(client) };
}

/**
 * PUT /v1/clients/{id}/status: an ancestor disables (or enables again) a client of its subtree.
 * A disabled client's keys, and those of every client below it, answer 2006 at login and on
 * every call (within EMISOR_AUTH_CACHE_SECONDS in other processes, at once in this one). Its
 * money stays where it is; incoming SPEI to its CLABEs is returned (cause 02). The change is
 * announced to the client's parent (`client.status_changed`, the answer's data), as its creation.
 */
export async function setClientStatus(
  db: Db,
  caller: Caller,
  id: string,
  status: "ACTIVE" | "DISABLED",
  onChanged: () => void,
) {
  const answer = await db.transaction().execute(async (tx) => {
    const client = await repo.findClientInScope(tx, caller.clientId, id);
    if (!client) throw new AppError(errors.clientNotFound);
    if (client.id === caller.clientId) throw new AppError(errors.clientStatusOwn);
    // Locked: a concurrent change waits, then reads the status this one left.
    const previous = await tx
      .selectFrom("clients")
      .select(["status", "disabled_by_client_id"])
      .where("id", "=", client.id)
      .forUpdate()
      .executeTakeFirstOrThrow();
    // A disable holds against the ancestors below the one that decided it: enabling again is that
    // client's, or one above it's (a parent must not undo its own parent's freeze and pay in).
    const disabler = previous.disabled_by_client_id;
    if (status === "ACTIVE" && disabler && disabler !== caller.clientId) {
      const above = await repo.findClientInScope(tx, caller.clientId, disabler);
      if (!above) throw new AppError(errors.clientEnableNotAllowed);
    }
    const data = { client: presentClient({ ...client, status }), previous_status: previous.status };
    if (previous.status !== status) {
      await tx
        .updateTable("clients")
        .set({
          status,
          disabled_by_client_id: status === "DISABLED" ? caller.clientId : null,
          updated_at: new Date(),
        })
        .where("id", "=", client.id)
        .execute();
      await emitEvent(tx, { type: "client.status_changed", clientId: client.parent_id ?? client.id, data });
    }
    return data;
  });
  onChanged();
  return answer;
}
