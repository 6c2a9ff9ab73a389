import { createHash } from "node:crypto";
import { setImmediate as nextTurn } from "node:timers/promises";
import type { AppContext } from "../../context.ts";
import type { Db } from "../../db/database.ts";
import { runAsTenant } from "../../db/tenant-scope.ts";
import { AppError, errors, invalidField } from "../../errors.ts";
import { bodyChecker } from "../../http/validation.ts";
import { limits } from "../../limits.ts";
import * as files from "./clearing-file-repository.ts";
import type { ClearingFileBodyType, ClearingFileReport } from "./clearing-file-schemas.ts";
import { type FileLine, type LineResult, ReportBuilder } from "./clearing-report.ts";
import type { PurchaseSettings } from "./message.ts";
import { CardMessageBody, type CardMessageBodyType } from "./schemas.ts";
import { messageOf, processMessage, purchaseSettings } from "./service.ts";

/**
 * A processor's clearing file: its CLEARING and RETURN lines matched to holds and posted, and a
 * reconciliation report. The file is processed once by its id: the first upload stores the digest
 * of its lines, then its report; a repeat answers that report, the same id with other lines is
 * refused. Each line is a message of its own (its message_id claimed as on the messages route), so
 * an upload retried after a crash half-way posts only the lines not posted yet, and counts the
 * others by the answers they got.
 */
export async function receiveClearingFile(
  ctx: AppContext,
  body: ClearingFileBodyType,
): Promise<{ report: Record<string, unknown>; replayed: boolean }> {
  const digest = linesDigest(body.lines);
  const stored = await files.startFile(ctx.db, body.file_id, body.lines.length, digest);
  if (stored.lines_sha256 !== digest) throw new AppError(errors.clearingFileReused);
  if (!("processing" in stored)) return { report: stored, replayed: true };
  // The file's lanes take the database's turns under a name of their own, so that when turns run
  // short the fair gate serves other work (authorizations, other tenants) before the file's next.
  const report = await runAsTenant(clearingFilesTenant, () => processFile(ctx, body, digest));
  return { report: await files.finishFile(ctx.db, body.file_id, report), replayed: false };
}

export const clearingFilesTenant = "card-clearing-files";

/** SHA-256 of the lines with every object's keys sorted: the same lines however they are spaced. */
export function linesDigest(lines: unknown[]): string {
  const sorted = (_key: string, value: unknown) =>
    value !== null && typeof value === "object" && !Array.isArray(value)
      ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : value;
  return createHash("sha256").update(JSON.stringify(lines, sorted)).digest("hex");
}

async function processFile(
  ctx: AppContext,
  body: ClearingFileBodyType,
  digest: string,
): Promise<ClearingFileReport> {
  const report = new ReportBuilder(body.file_id, body.lines.length, digest);
  const lines = await parseLines(ctx, body.file_id, body.lines);
  const valid: FileLine[] = [];
  const first = new Set<string>();
  for (const line of lines) {
    if (line.refusal) report.add(line, { kind: "refused", error: line.refusal });
    // A message_id repeated in the file: the later lines are repeats of the first, whatever it did.
    else if (first.has(line.messageId ?? "")) report.add(line, { kind: "duplicate" });
    else {
      first.add(line.messageId ?? "");
      valid.push(line);
    }
  }
  const lanes = await laneLines(ctx.db, valid);
  const settings = purchaseSettings(ctx);
  await Promise.all(lanes.map((lane) => runLane(ctx.db, body.file_id, lane, settings, report)));
  return report.report();
}

const checkLine = bodyChecker(CardMessageBody);

/**
 * Each line checked against the messages route's schema and read as a message (a ciphered card
 * number deciphered, on the RSA workers, a batch at a time), in turns that let other requests run.
 */
async function parseLines(ctx: AppContext, fileId: string, raw: unknown[]): Promise<FileLine[]> {
  const lines: FileLine[] = [];
  for (let from = 0; from < raw.length; from += limits.clearingFileParseBatch) {
    const batch = raw.slice(from, from + limits.clearingFileParseBatch);
    lines.push(...(await Promise.all(batch.map((value, i) => parseLine(ctx, fileId, value, from + i + 1)))));
    await nextTurn();
  }
  return lines;
}

async function parseLine(ctx: AppContext, fileId: string, value: unknown, line: number): Promise<FileLine> {
  const id = (value as { message_id?: unknown } | null)?.message_id;
  const messageId = typeof id === "string" ? id : null;
  const refusal = checkLine(value);
  if (refusal) return { line, messageId, refusal };
  const body = value as CardMessageBodyType;
  if (body.type !== "CLEARING" && body.type !== "RETURN")
    return { line, messageId, refusal: invalidField("type", "enum", "must be CLEARING or RETURN in a file") };
  try {
    return { line, messageId, message: await messageOf(ctx, body, fileId) };
  } catch (error) {
    if (error instanceof AppError && error.def.status < 500) return { line, messageId, refusal: error };
    throw error;
  }
}

/**
 * The lines in lanes by card, each lane in file order: lanes run at once and never touch the same
 * card, so no lane waits for another's locks, and one card's lines apply in the file's order.
 */
async function laneLines(db: Db, lines: FileLine[]): Promise<FileLine[][]> {
  const authorizationIds = new Set<string>();
  const fingerprints = new Set<string>();
  for (const { message } of lines) {
    if (message?.authorizationId) authorizationIds.add(message.authorizationId);
    else if (message?.card && "fingerprint" in message.card) fingerprints.add(message.card.fingerprint);
  }
  const cards = await files.cardsOfLines(db, [...authorizationIds], [...fingerprints]);
  const lanes: FileLine[][] = Array.from({ length: limits.clearingFileLanes }, () => []);
  for (const line of lines) {
    const message = line.message;
    const ref = message?.card;
    const card = message?.authorizationId
      ? cards.byAuthorization.get(message.authorizationId)
      : ref && "fingerprint" in ref
        ? cards.byFingerprint.get(ref.fingerprint)
        : ref?.id;
    // A line whose card is not known is refused, in any lane.
    lanes[laneOf(card ?? String(line.line))]?.push(line);
  }
  return lanes.filter((lane) => lane.length > 0);
}

function laneOf(key: string): number {
  let hash = 2166136261;
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 16777619);
  return (hash >>> 0) % limits.clearingFileLanes;
}

async function runLane(
  db: Db,
  fileId: string,
  lane: FileLine[],
  settings: PurchaseSettings,
  report: ReportBuilder,
): Promise<void> {
  for (const line of lane) report.add(line, await runLine(db, fileId, line, settings));
}

/** One line as the messages route runs it; a repeat of this file's own line counts as posted. */
async function runLine(
  db: Db,
  fileId: string,
  line: FileLine,
  settings: PurchaseSettings,
): Promise<LineResult> {
  const message = line.message;
  if (!message) throw new Error("a line without a message reached a lane");
  try {
    const { answer, replayed } = await processMessage(db, message, settings);
    if (!replayed || (await files.messagesOfFile(db, fileId, [message.messageId])).size === 1)
      return { kind: "posted", answer };
    return { kind: "duplicate" };
  } catch (error) {
    if (error instanceof AppError && error.def.status < 500) return { kind: "refused", error };
    throw error;
  }
}
