import { BatchQueue, type Queued } from "../../db/batch-queue.ts";
import type { Db, Tx } from "../../db/database.ts";
import { trackingKeyDate } from "../../domain/spei.ts";
import { limits } from "../../limits.ts";
import type { SpeiStateChange } from "../../rails/spei/port.ts";
import { outboxRow } from "../events/outbox.ts";
import { lockOrdersByKeys, type OrderKey, settleOrdersAtOnce } from "./order-batches.ts";
import {
  applySpeiStateChange,
  applyStateChangeTx,
  type StateChangeOutcome,
  stateDetailOf,
} from "./outgoing.ts";
import * as repo from "./repository.ts";
import { renderOrder } from "./views.ts";

/**
 * The rail's state changes, applied in batches: what arrives while one batch is written is the
 * next, in one transaction. A settlement of an order named once in the batch (nearly all of them)
 * is written with the others in one statement; anything else (a return, a cancellation, an order
 * named twice, a key not found on its date) goes through the order's state machine one after
 * another, in arrival order, in the same transaction. If the batch fails, each change is applied
 * on its own: a change applied twice is ignored the second time, so this is always safe.
 */
export class SpeiStateChanges {
  readonly #db: Db;
  readonly #queue: BatchQueue<SpeiStateChange, StateChangeOutcome>;
  /** Changes applied in a batch of several, and on their own (alone, or after a failed batch). */
  readonly applied = { inBatches: 0, alone: 0 };

  constructor(db: Db) {
    this.#db = db;
    this.#queue = new BatchQueue(limits.stateChangeBatchMax, (batch) => this.#write(batch));
  }

  /** Applies the change; undefined when no order has its key. */
  apply(change: SpeiStateChange): Promise<StateChangeOutcome> {
    return this.#queue.submit(change);
  }

  async #write(batch: Queued<SpeiStateChange, StateChangeOutcome>[]): Promise<void> {
    if (batch.length > 1) {
      try {
        const outcomes = await applySpeiStateChanges(
          this.#db,
          batch.map(({ item }) => item),
        );
        for (const [i, { resolve }] of batch.entries()) resolve(outcomes[i]);
        this.applied.inBatches += batch.length;
        return;
      } catch {
        // Each on its own below: the one that failed answers its own error.
      }
    }
    this.applied.alone += batch.length;
    await Promise.all(
      batch.map(({ item, resolve, reject }) => applySpeiStateChange(this.#db, item).then(resolve, reject)),
    );
  }
}

/** Where an order named by a change may be: its operation date, else the date its key carries. */
function keysOf(change: SpeiStateChange): OrderKey[] {
  const keysDate = trackingKeyDate(change.trackingKey);
  const named = { operationDate: change.operationDate, trackingKey: change.trackingKey };
  return keysDate && keysDate !== change.operationDate
    ? [named, { ...named, operationDate: keysDate }]
    : [named];
}

/** Several state changes in one transaction, answered in order (see SpeiStateChanges). */
export async function applySpeiStateChanges(
  db: Db,
  changes: SpeiStateChange[],
): Promise<StateChangeOutcome[]> {
  return db.transaction().execute(async (tx) => {
    const locked = await lockOrdersByKeys(tx, changes.flatMap(keysOf));
    const byKey = new Map(locked.map((order) => [`${order.operation_date}|${order.tracking_key}`, order]));
    const targets = changes.map((change) =>
      keysOf(change)
        .map((key) => byKey.get(`${key.operationDate}|${key.trackingKey}`))
        .find((order) => order !== undefined),
    );
    const named = new Map<string, number>();
    for (const order of targets) if (order) named.set(order.id, (named.get(order.id) ?? 0) + 1);
    const outcomes: StateChangeOutcome[] = new Array(changes.length);
    const settled: repo.SpeiOrderRow[] = [];
    changes.forEach((change, i) => {
      const order = targets[i];
      if (!order || named.get(order.id) !== 1 || change.estado !== "LIQUIDACION") return;
      if (order.status !== "PENDIENTE" && order.status !== "ENVIADA") return;
      const now = new Date();
      const after: repo.SpeiOrderRow = {
        ...order,
        status: "LIQUIDADA",
        settled_at: change.tsLiquidacion ?? now,
        state_detail: stateDetailOf(change),
        updated_at: now,
      };
      settled.push(after);
      outcomes[i] = { applied: true, order: after };
    });
    if (settled.length > 0) await settleOrdersAtOnce(tx, settled, settled.map(settledEvent));
    for (const [i, change] of changes.entries()) {
      const order = targets[i];
      if (outcomes[i] || !order) continue;
      outcomes[i] = await applyOneInBatch(tx, order.id, change);
    }
    return outcomes;
  });
}

function settledEvent(order: repo.SpeiOrderRow) {
  return outboxRow({ type: "transfer.out.settled", clientId: order.client_id, data: renderOrder(order) });
}

/** A change that is not a plain settlement, on an order this transaction has locked. */
async function applyOneInBatch(
  tx: Tx,
  orderId: string,
  change: SpeiStateChange,
): Promise<StateChangeOutcome> {
  const current = await repo.findOrderById(tx, orderId);
  if (!current) return undefined;
  const applied = await applyStateChangeTx(tx, current, change);
  return { applied, order: applied ? ((await repo.findOrderById(tx, orderId)) ?? current) : current };
}
