import type { Db, Tx } from "../../db/database.ts";
import { AppError, errors } from "../../errors.ts";
import { postingShardOf, systemAccounts } from "../../ledger/accounts.ts";
import { type BatchEntry, postEntriesOnShards } from "../../ledger/batch.ts";
import { windowKeysAt } from "../controls/windows.ts";
import { emitEvents, type NewEvent } from "../events/outbox.ts";
import { cardEntryInput } from "./card-money.ts";
import { planClearing, planForcePost, postedOutcome, returnEntry } from "./clearing.ts";
import * as batch from "./clearing-batch-repository.ts";
import type { FileLine, LineResult } from "./clearing-report.ts";
import type { CardMessage, Outcome } from "./message.ts";
import type { AuthorizationRow, CardState, MessageRecord, NewAuthorization } from "./repository.ts";
import { answerFor, type MessageAnswer } from "./service.ts";
import { moveSpending, spendingDeltas } from "./spending.ts";

/**
 * A chunk of a clearing file's lines in one transaction, a statement per step rather than a
 * transaction per line: the ids claimed at once, the cards locked at once (in id order), each line
 * decided in file order by the messages route's own rules (clearing.ts), then the rows, events and
 * entries written at once, the entries last so the system accounts' rows are held the least. A
 * line the messages route would refuse (unknown card or authorization) is refused here alike and
 * leaves nothing. Answers each line's result once the transaction committed.
 */
export async function postChunk(
  db: Db,
  fileId: string,
  lines: FileLine[],
): Promise<Array<[FileLine, LineResult]>> {
  return db.transaction().execute(async (tx) => {
    const messages = lines.map(messageOf);
    const claimed = await batch.claimMessages(tx, messages, fileId);
    const results = new Map<FileLine, LineResult>();
    const fresh = lines.filter((line) => claimed.has(messageOf(line).messageId));
    const earlier = lines.filter((line) => !claimed.has(messageOf(line).messageId));
    await answerEarlier(tx, fileId, earlier, results);
    const state = await lockState(tx, fresh.map(messageOf));
    const writes = new ChunkWrites(fileId);
    for (const line of fresh) results.set(line, await applyLine(tx, messageOf(line), state, writes));
    await writes.write(tx);
    return lines.map((line): [FileLine, LineResult] => [line, results.get(line) ?? { kind: "duplicate" }]);
  });
}

function messageOf(line: FileLine): CardMessage {
  if (!line.message) throw new Error("a line without a message reached a chunk");
  return line.message;
}

/** Lines claimed before: this file's own (an earlier upload of it) count by their answer. */
async function answerEarlier(
  tx: Tx,
  fileId: string,
  lines: FileLine[],
  results: Map<FileLine, LineResult>,
): Promise<void> {
  const stored = await batch.storedMessages(
    tx,
    lines.map((line) => messageOf(line).messageId),
  );
  for (const line of lines) {
    const row = stored.get(messageOf(line).messageId);
    results.set(
      line,
      row?.file_id === fileId
        ? { kind: "posted", answer: row.response as MessageAnswer }
        : { kind: "duplicate" },
    );
  }
}

/** The state a chunk's lines apply to: their cards locked, their authorizations and holds as now. */
interface ChunkState {
  cards: Map<string, CardState>;
  byFingerprint: Map<string, CardState>;
  authorizations: Map<string, AuthorizationRow>;
  held: Map<string, bigint>;
  networkShard: string;
}

async function lockState(tx: Tx, messages: CardMessage[]): Promise<ChunkState> {
  const ids = new Set<string>();
  const fingerprints = new Set<string>();
  const authorizationIds = new Set<string>();
  for (const message of messages) {
    if (message.authorizationId) authorizationIds.add(message.authorizationId);
    if (message.card && "id" in message.card) ids.add(message.card.id);
    else if (message.card) fingerprints.add(message.card.fingerprint);
  }
  const named = { ids: [...ids], fingerprints: [...fingerprints], authorizationIds: [...authorizationIds] };
  const cards = messages.length === 0 ? [] : await batch.lockCards(tx, named);
  // Read once the cards are locked: every change of an authorization locks its card first.
  const authorizations = await batch.authorizationsById(tx, named.authorizationIds);
  return {
    cards: new Map(cards.map((card) => [card.id, card])),
    byFingerprint: new Map(cards.map((card) => [card.pan_fingerprint, card])),
    authorizations: new Map(authorizations.map((row) => [row.id, row])),
    held: await batch.heldByCard(
      tx,
      cards.map((card) => card.id),
    ),
    // One CARD_NETWORK shard for the chunk: it is one transaction, more would only lock more rows.
    networkShard: postingShardOf(systemAccounts.cardNetwork),
  };
}

/** What a chunk writes once every line is decided. */
class ChunkWrites {
  readonly #fileId: string;
  readonly entries: BatchEntry[] = [];
  readonly created: NewAuthorization[] = [];
  readonly changed = new Map<string, AuthorizationRow>();
  /** Each changed authorization as the chunk found it: what it spent before. */
  readonly before = new Map<string, AuthorizationRow>();
  readonly records: MessageRecord[] = [];
  readonly events: NewEvent[] = [];
  readonly refused: string[] = [];

  constructor(fileId: string) {
    this.#fileId = fileId;
  }

  record(message: CardMessage, outcome: Outcome, answer: MessageAnswer): void {
    this.records.push({
      messageId: message.messageId,
      cardId: outcome.card?.id ?? null,
      clientId: outcome.card?.client_id ?? null,
      authorizationId: outcome.authorization?.id ?? null,
      amountCents: outcome.amountCents,
      entryId: outcome.entryId,
      reversesMessageId: null,
      fileId: this.#fileId,
      merchant: message.merchant,
      response: answer,
    });
    this.events.push(...outcome.events);
  }

  async write(tx: Tx): Promise<void> {
    await batch.releaseClaims(tx, this.refused);
    await batch.insertAuthorizations(tx, this.created);
    await batch.updateAuthorizations(tx, [...this.changed.values()]);
    await this.#moveSpending(tx);
    await batch.recordMessages(tx, this.records);
    await emitEvents(tx, this.events);
    await postEntriesOnShards(tx, this.entries);
  }

  /** What the chunk's force posts and clearings changed of their cards' spending. */
  async #moveSpending(tx: Tx): Promise<void> {
    const at = new Date();
    const now = windowKeysAt(at);
    const changes = [
      ...this.created.map((row) => ({ after: { ...row, created_at: at } })),
      ...[...this.changed.values()].map((row) => ({ before: this.before.get(row.id), after: row })),
    ];
    await moveSpending(tx, spendingDeltas(changes, now), now);
  }
}

async function applyLine(
  tx: Tx,
  message: CardMessage,
  state: ChunkState,
  writes: ChunkWrites,
): Promise<LineResult> {
  let outcome: Outcome;
  try {
    if (message.type === "RETURN") outcome = await credit(tx, message, state, writes);
    else if (message.authorizationId) outcome = await clearHold(tx, message, state, writes);
    else outcome = await forcePost(tx, message, state, writes);
  } catch (error) {
    if (!(error instanceof AppError) || error.def.status >= 500) throw error;
    writes.refused.push(message.messageId);
    return { kind: "refused", error };
  }
  const answer = answerFor(message, outcome, outcome.card ? (state.held.get(outcome.card.id) ?? 0n) : 0n);
  writes.record(message, outcome, answer);
  return { kind: "posted", answer };
}

/** The authorization a line names and its card, refused as lockAuthorization refuses. */
function namedAuthorization(message: CardMessage, state: ChunkState) {
  const authorization = state.authorizations.get(message.authorizationId ?? "");
  if (!authorization) throw new AppError(errors.authorizationNotFound);
  if (message.card && "id" in message.card && message.card.id !== authorization.card_id)
    throw new AppError(errors.authorizationOfAnotherCard);
  const card = state.cards.get(authorization.card_id);
  if (!card) throw new AppError(errors.cardNotFound);
  return { card, authorization };
}

/** The card a line names, refused as lockNamedCard refuses. */
function namedCard(message: CardMessage, state: ChunkState): CardState {
  const ref = message.card;
  if (!ref) throw new AppError(errors.validationFailed, { message: "card_id or card_number is required" });
  const card = "id" in ref ? state.cards.get(ref.id) : state.byFingerprint.get(ref.fingerprint);
  if (!card) throw new AppError(errors.cardNotFound);
  return card;
}

async function clearHold(
  tx: Tx,
  message: CardMessage,
  state: ChunkState,
  writes: ChunkWrites,
): Promise<Outcome> {
  const { card, authorization } = namedAuthorization(message, state);
  const plan = planClearing(message, authorization, state.networkShard);
  const entry = await cardEntryInput(tx, card, plan.entry);
  if (entry) writes.entries.push(entry);
  const updated: AuthorizationRow = { ...authorization, ...plan.change };
  if (!writes.before.has(updated.id)) writes.before.set(updated.id, authorization);
  state.authorizations.set(updated.id, updated);
  writes.changed.set(updated.id, updated);
  state.held.set(card.id, (state.held.get(card.id) ?? 0n) - authorization.held_cents + updated.held_cents);
  return postedOutcome(message, card, {
    authorization: updated,
    entryId: entry?.id ?? null,
    overTolerance: plan.overTolerance,
  });
}

async function forcePost(
  tx: Tx,
  message: CardMessage,
  state: ChunkState,
  writes: ChunkWrites,
): Promise<Outcome> {
  const card = namedCard(message, state);
  const plan = planForcePost(message, card, state.networkShard);
  const entry = await cardEntryInput(tx, card, plan.entry);
  if (entry) writes.entries.push(entry);
  writes.created.push(plan.row);
  const now = new Date();
  return postedOutcome(message, card, {
    authorization: { ...plan.row, created_at: now, updated_at: now, decision: null, decision_metadata: null },
    entryId: entry?.id ?? null,
  });
}

async function credit(
  tx: Tx,
  message: CardMessage,
  state: ChunkState,
  writes: ChunkWrites,
): Promise<Outcome> {
  const named = message.authorizationId ? namedAuthorization(message, state) : undefined;
  const card = named?.card ?? namedCard(message, state);
  const entry = await cardEntryInput(
    tx,
    card,
    returnEntry(message, named?.authorization ?? null, state.networkShard),
  );
  if (entry) writes.entries.push(entry);
  return postedOutcome(message, card, {
    authorization: named?.authorization ?? null,
    entryId: entry?.id ?? null,
  });
}
