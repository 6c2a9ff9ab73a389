import type { Db } from "../../db/database.ts";
import type { Caller } from "../../http/caller.ts";
import type { IdempotentResult } from "../../idempotency/reply.ts";
import { runIdempotent } from "../../idempotency/run.ts";
import type { IdempotencyScope } from "../../idempotency/store.ts";
import { balanceOf } from "../../ledger/ledger.ts";
import { type Cents, toPesos } from "../../ledger/money.ts";
import { fundFromSandbox } from "../clients/service.ts";

/** Adds money to the caller's main balance from the sandbox funding account. */
export async function fundCaller(
  db: Db,
  caller: Caller,
  amountCents: Cents,
  idempotency: IdempotencyScope | undefined,
): Promise<IdempotentResult> {
  return runIdempotent(db, idempotency, async (tx) => {
    const entryId = await fundFromSandbox(tx, caller.clientId, amountCents);
    const available = await balanceOf(tx, caller.clientId);
    return { funding: { id: entryId, amount: toPesos(amountCents), available: toPesos(available) } };
  });
}
