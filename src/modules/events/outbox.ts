import type { Tx } from "../../db/database.ts";
import { timeOrderedUuid } from "../../ledger/ids.ts";
import { insertEventsWithDeliveries, type OutboxEvent } from "./repository.ts";

/**
 * The event outbox. A service calls emitEvent inside the transaction that makes the change, so
 * a rolled-back change leaves no event and a committed one always has its event. `data` is shaped
 * like the matching API resource and must never hold a PAN, CVV, PIN, password or token.
 */
export const eventTypes = [
  "client.created",
  "client.status_changed",
  "client.transfer",
  "client.transfer.credited",
  "client.transfer.debited",
  "cardholder.created",
  "card.assigned",
  "card.activated",
  "card.status_changed",
  "card.cvv_failures",
  "card.payment",
  "card.payment.received",
  "card.unloaded",
  "transfer.out.created",
  "transfer.out.settled",
  "transfer.out.returned",
  "transfer.in.received",
  "airtime.completed",
  "airtime.failed",
  "card_authorization.created",
  "card_authorization.updated",
  "card_transaction.created",
] as const;

export type EventType = (typeof eventTypes)[number];

/** Sent only by POST /v1/webhooks/{id}/test, only to that endpoint; never subscribed to. */
export const testEventType = "webhook.test";

export interface NewEvent {
  type: EventType;
  /** The client that owns the resource the event is about. */
  clientId: string;
  data: Record<string, unknown>;
}

export async function emitEvent(tx: Tx, event: NewEvent): Promise<string> {
  const [id] = await emitEvents(tx, [event]);
  return id ?? "";
}

/**
 * Several events in one statement (a batch of payments). Returns their ids in order. The same
 * transaction queues one webhook delivery per endpoint that wants each event, so deliveries
 * exist exactly when their events do.
 */
export async function emitEvents(tx: Tx, events: NewEvent[]): Promise<string[]> {
  if (events.length === 0) return [];
  const rows = outboxRows(events);
  await insertEventsWithDeliveries(tx, rows);
  return rows.map((row) => row.id);
}

/** Events as the outbox stores them, for a statement that writes them itself (payments). */
export function outboxRows(events: NewEvent[]): OutboxEvent[] {
  return events.map(outboxRow);
}

/** An event as the outbox stores it, for a statement that writes it itself (a transfers batch). */
export function outboxRow(event: NewEvent): OutboxEvent {
  return {
    id: timeOrderedUuid(),
    type: event.type,
    clientId: event.clientId,
    data: JSON.stringify(event.data),
  };
}
