import type { Db } from "../../db/database.ts";
import { owingCardsWithMoney, repayOwed } from "../../ledger/card-owed.ts";
import type { PurchaseSettings } from "./message.ts";
import * as repo from "./repository.ts";
import { processMessage } from "./service.ts";

/**
 * One pass of the expiry worker: each pending hold past its expiry is released as an
 * AUTHORIZATION_EXPIRY message of its own, through the path every message takes. The message's id
 * names the authorization and the deadline it passed, so two processes releasing one hold (or a
 * pass retried after a crash) release it once, and a hold an advice renewed expires again later.
 * Returns how many holds it looked at.
 */
export async function expireHolds(db: Db, settings: PurchaseSettings, batch: number): Promise<number> {
  const due = await repo.expiredHolds(db, batch);
  for (const hold of due) {
    await processMessage(
      db,
      {
        messageId: `expiry-${hold.id}-${hold.expires_at.getTime()}`,
        type: "AUTHORIZATION_EXPIRY",
        authorizationId: hold.id,
        currency: "484",
        merchantAmount: 0n,
        channel: "POS_CHIP",
        partialAllowed: false,
        isFinal: true,
      },
      settings,
    );
  }
  return due.length;
}

/**
 * One pass of the repayment sweep: money that reached a card that owes by a path that does not
 * repay at once (a returned transfer out) repays the debt here, each card in its own transaction.
 * Until then a purchase already counts the debt against what the card can spend.
 */
export async function repayOwingCards(db: Db, batch: number): Promise<number> {
  const cards = await owingCardsWithMoney(db, batch);
  for (const cardId of cards) await db.transaction().execute((tx) => repayOwed(tx, cardId));
  return cards.length;
}
