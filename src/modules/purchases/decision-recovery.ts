import type { Db } from "../../db/database.ts";
import { limits } from "../../limits.ts";
import { findEffectiveEndpoints } from "../decisions/repository.ts";
import { type AbandonedDecision, abandonedDecisions, finishDecision } from "./decision-repository.ts";
import { standInOf } from "./decisions.ts";
import * as repo from "./repository.ts";
import type { MessageAnswer } from "./service.ts";

/**
 * Decisions that will never be recorded by the process that asked for them (it stopped while
 * the client decided): once the longest a call may take has passed, the client's stand-in is
 * applied as a timeout, exactly as that process would have applied it.
 */
const abandonedAfterMs = limits.authorizationDecisionTimeoutMsMax + limits.authorizationDecisionGraceMs;

async function standInAbandoned(db: Db, abandoned: AbandonedDecision): Promise<MessageAnswer> {
  const endpoint = (await findEffectiveEndpoints(db, [abandoned.client_id])).get(abandoned.client_id);
  const decided = standInOf(
    endpoint?.stand_in ?? "DECLINE",
    abandoned.held_cents,
    "WEBHOOK_TIMEOUT",
    "no decision was recorded: the process that asked for it stopped",
  );
  return finishDecision(db, abandoned.id, abandoned.message_id, decided);
}

/** One pass of the recovery worker; how many authorizations it looked at. */
export async function recoverAbandonedDecisions(db: Db, batch: number): Promise<number> {
  const abandoned = await abandonedDecisions(db, abandonedAfterMs, batch);
  for (const one of abandoned) await standInAbandoned(db, one);
  return abandoned.length;
}

/**
 * The answer to a message whose row has none yet: the client is still deciding, in this process or
 * another. Waits outside any transaction until it is recorded; past the longest it may take, the
 * stand-in is applied here.
 */
export async function answerWhenDecided(db: Db, messageId: string): Promise<MessageAnswer> {
  const deadline = Date.now() + abandonedAfterMs;
  for (;;) {
    const stored = await repo.storedAnswer(db, messageId);
    if (stored !== null && stored !== undefined) return stored as MessageAnswer;
    if (Date.now() >= deadline) break;
    await new Promise((resolve) => setTimeout(resolve, limits.authorizationDecisionPollMs));
  }
  const [abandoned] = await abandonedDecisions(db, 0, 1, messageId);
  if (!abandoned) return (await repo.storedAnswer(db, messageId)) as MessageAnswer;
  return standInAbandoned(db, abandoned);
}
