import assert from "node:assert/strict";
import type { Db } from "../../db/database.ts";
import { AppError, errors, invalidField } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import { instantIdPage } from "../../http/cursor.ts";
import { createdWindow } from "../../http/schemas.ts";
import type { IdempotentResult } from "../../idempotency/reply.ts";
import { runIdempotent } from "../../idempotency/run.ts";
import type { IdempotencyScope } from "../../idempotency/store.ts";
import { timeOrderedUuid } from "../../ledger/ids.ts";
import { postEntry } from "../../ledger/ledger.ts";
import { parsePesos, toPesos } from "../../ledger/money.ts";
import { limits } from "../../limits.ts";
import { emitEvents, type NewEvent } from "../events/outbox.ts";
import * as repo from "./repository.ts";
import type { ClientTransferBodyType } from "./schemas.ts";

/**
 * Money between the main balances of two clients of the caller's subtree, after creation: a parent
 * tops up a sub-client, or takes money back (from a disabled one too: winding it down is the
 * point), or moves it between two of its sub-clients. One balanced journal entry (kind
 * CLIENT_TRANSFER) in one transaction with the client_transfers row and the client.transfer event.
 */
export const clientTransferEntryKind = "CLIENT_TRANSFER";

/** A transfer row as the API shows it (answer, event and listing). */
function presentTransfer(row: Omit<repo.ListedClientTransferRow, "created_key">) {
  return {
    id: row.id,
    from_client_id: row.from_client_id,
    to_client_id: row.to_client_id,
    created_by_client_id: row.created_by_client_id,
    amount: toPesos(BigInt(row.amount_cents)),
    description: row.description,
    created_at: new Date(row.created_at).toISOString(),
  };
}

/**
 * POST /v1/clients/transfers. Both sides must be the caller or below it (anything else is 3101, as
 * every client endpoint answers); the payer keeps at least its minimum balance (5105, as 5102 for
 * funding a new sub-client); the receiver may not be disabled, nor below a disabled client (5106:
 * the money could not be used, as incoming SPEI to it is returned). The event is the caller's,
 * and each side that is not the caller gets one of its own (credited or debited).
 */
export async function transferBetweenClients(
  db: Db,
  caller: Caller,
  body: ClientTransferBodyType,
  idempotency: IdempotencyScope | undefined,
): Promise<IdempotentResult> {
  const amountCents = parsePesos(body.amount, "amount", { maxCents: limits.fundingCentsMax });
  // UUIDs arrive in either letter case; the database compares them as uuids, this code as text.
  const fromId = body.from_client_id.toLowerCase();
  const toId = body.to_client_id.toLowerCase();
  if (fromId === toId) throw invalidField("to_client_id", "different", "must not be from_client_id");
  return runIdempotent(db, idempotency, async (tx) => {
    const parties = await repo.lockTransferParties(tx, caller.clientId, [fromId, toId]);
    const from = parties.find((party) => party.id === fromId);
    const to = parties.find((party) => party.id === toId);
    if (!from || !to) throw new AppError(errors.clientNotFound);
    if (to.status !== "ACTIVE") throw new AppError(errors.clientTransferToDisabled);
    if (from.balance_cents - amountCents < from.min_balance_cents) {
      throw new AppError(errors.clientTransferInsufficient);
    }
    const id = timeOrderedUuid();
    await postEntry(tx, {
      id,
      kind: clientTransferEntryKind,
      description: body.description ?? "Transfer between clients",
      clientId: caller.clientId,
      postings: [
        { accountId: fromId, amountCents: -amountCents },
        { accountId: toId, amountCents },
      ],
    });
    const row = await repo.insertClientTransfer(tx, {
      id,
      from_client_id: fromId,
      to_client_id: toId,
      created_by_client_id: caller.clientId,
      amount_cents: amountCents,
      description: body.description ?? null,
    });
    const data = {
      transfer: presentTransfer(row),
      from_available: toPesos(from.balance_cents - amountCents),
      to_available: toPesos(to.balance_cents + amountCents),
    };
    const events = transferEvents(caller, parties, { from, to }, data);
    await emitEvents(tx, events);
    return data;
  });
}

/**
 * The caller decided it and sees both sides: client.transfer is its own, as client.created is. A
 * side that is not the caller learns that its balance moved: the transfer as its own listing shows
 * it (a client outside its subtree, such as a sibling or the caller, is null) and its own balance
 * only.
 */
function transferEvents(
  caller: Caller,
  parties: repo.TransferParty[],
  sides: { from: repo.TransferParty; to: repo.TransferParty },
  data: { transfer: ReturnType<typeof presentTransfer>; from_available: number; to_available: number },
): NewEvent[] {
  const { from, to } = sides;
  const sideView = (side: repo.TransferParty) => {
    const visible = (id: string) =>
      id === side.id || parties.some((party) => party.id === id && party.lineage.includes(side.id))
        ? id
        : null;
    return {
      ...data.transfer,
      from_client_id: visible(from.id),
      to_client_id: visible(to.id),
      created_by_client_id: visible(caller.clientId),
    };
  };
  const events: NewEvent[] = [{ type: "client.transfer", clientId: caller.clientId, data }];
  if (from.id !== caller.clientId)
    events.push({
      type: "client.transfer.debited",
      clientId: from.id,
      data: { transfer: sideView(from), available: data.from_available },
    });
  if (to.id !== caller.clientId)
    events.push({
      type: "client.transfer.credited",
      clientId: to.id,
      data: { transfer: sideView(to), available: data.to_available },
    });
  return events;
}

export interface ClientTransferListQuery {
  client_id?: string | undefined;
  created_from?: string | undefined;
  created_to?: string | undefined;
  perPage: number;
  cursor?: string | undefined;
}

/**
 * GET /v1/clients/transfers: every transfer that paid from or into a main balance of the caller's
 * subtree, newest first, keyset-paged on (created_at, id) with a cursor bound to the filters and
 * per_page (as GET /v1/transfer/cards). A sub-client sees the transfers its parent made on its
 * balance; the side it may not see is null.
 */
export async function listClientTransfers(db: Db, caller: Caller, query: ClientTransferListQuery) {
  const { createdFrom, createdTo } = createdWindow(query.created_from, query.created_to);
  const clientId = query.client_id?.toLowerCase();
  const listing = [
    caller.clientId,
    clientId ?? "",
    createdFrom?.toISOString() ?? "",
    createdTo?.toISOString() ?? "",
    query.perPage,
  ];
  const { items, nextCursor } = await instantIdPage(
    query,
    listing,
    async (before, limit) => {
      if (clientId && !(await repo.findClientInScope(db, caller.clientId, clientId)))
        throw new AppError(errors.clientNotFound);
      return repo.listTransfersInScope(db, {
        scopeClientId: caller.clientId,
        clientId,
        createdFrom,
        createdTo,
        before,
        limit,
      });
    },
    (row) => row.created_key,
  );
  assert.ok(
    items.every((row) => row.from_client_id || row.to_client_id),
    "a listed transfer touches the scope",
  );
  return {
    transfers: items.map(presentTransfer),
    per_page: query.perPage,
    next_cursor: nextCursor,
  };
}
