import type { AppContext } from "../../context.ts";
import { isDatabaseUnavailable, isOutcomeUnknown, isTransientDatabaseError } from "../../db/failures.ts";
import { runAsTenant } from "../../db/tenant-scope.ts";
import { AppError, errors } from "../../errors.ts";
import { limits } from "../../limits.ts";
import { postChunk } from "./clearing-batch.ts";
import { type PendingLine, readLines, type SplitFile, scanLines, splitFile } from "./clearing-file-lines.ts";
import * as files from "./clearing-file-repository.ts";
import type { ClearingFileReport } from "./clearing-file-schemas.ts";
import { type FileLine, type LineResult, ReportBuilder } from "./clearing-report.ts";
import { processMessage, purchaseSettings } from "./service.ts";

/**
 * A processor's clearing file: its CLEARING and RETURN lines matched to holds and posted, and a
 * reconciliation report. The file is processed once by its id: the first upload stores the digest
 * of its lines, then its report; a repeat answers that report, the same id with other lines is
 * refused. Each line is a message of its own (its message_id claimed as on the messages route), so
 * an upload retried after a crash half-way posts only the lines not posted yet, and counts the
 * others by the answers they got. No transaction spans the file: each chunk of lines is its own.
 */
export async function receiveClearingFile(
  ctx: AppContext,
  raw: Buffer | undefined,
): Promise<{ report: Record<string, unknown>; replayed: boolean }> {
  const file = splitFile(raw ?? Buffer.alloc(0));
  const stored = await files.startFile(ctx.db, file.fileId, file.lines.length, file.digest);
  if (stored.lines_sha256 !== file.digest) throw new AppError(errors.clearingFileReused);
  if (!("processing" in stored)) return { report: stored, replayed: true };
  // The file's lanes take the database's turns under a name of their own, so that when turns run
  // short the fair gate serves other work (authorizations, other tenants) before the file's next.
  const report = await runAsTenant(clearingFilesTenant, () => processFile(ctx, file));
  return { report: await files.finishFile(ctx.db, file.fileId, report), replayed: false };
}

export const clearingFilesTenant = "card-clearing-files";

async function processFile(ctx: AppContext, file: SplitFile): Promise<ClearingFileReport> {
  const report = new ReportBuilder(file.fileId, file.lines.length, file.digest);
  const lanes = await scanLines(ctx, file, report);
  await Promise.all(lanes.map((lane) => runLane(ctx, file, lane, report)));
  return report.report();
}

/** A lane's lines in chunks, in file order, each chunk read again and posted in one transaction. */
async function runLane(ctx: AppContext, file: SplitFile, lane: PendingLine[], report: ReportBuilder) {
  for (let from = 0; from < lane.length; from += limits.clearingFileChunkLines) {
    const read = await readLines(ctx, file, lane.slice(from, from + limits.clearingFileChunkLines));
    const chunk: FileLine[] = [];
    for (const line of read)
      if (line.refusal) report.add(line, { kind: "refused", error: line.refusal });
      else chunk.push(line);
    for (const [line, result] of await runChunk(ctx, file.fileId, chunk)) report.add(line, result);
  }
}

/**
 * A chunk at once (clearing-batch.ts); a chunk that fails whole for another reason than the
 * database being away (a deadlock retried, a check of the ledger's) runs again a line at a time, as
 * the messages route runs each, so that whatever failed refuses only its own line.
 */
async function runChunk(
  ctx: AppContext,
  fileId: string,
  chunk: FileLine[],
): Promise<Array<[FileLine, LineResult]>> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await postChunk(ctx.db, fileId, chunk);
    } catch (error) {
      if (isDatabaseUnavailable(error) || isOutcomeUnknown(error)) throw error;
      if (!isTransientDatabaseError(error) || attempt >= 3) break;
    }
  }
  const results: Array<[FileLine, LineResult]> = [];
  for (const line of chunk) results.push([line, await runLine(ctx, fileId, line)]);
  return results;
}

/** One line as the messages route runs it; a repeat of this file's own line counts as posted. */
async function runLine(ctx: AppContext, fileId: string, line: FileLine): Promise<LineResult> {
  const message = line.message;
  if (!message) throw new Error("a line without a message reached a lane");
  try {
    const { answer, replayed } = await processMessage(ctx.db, message, purchaseSettings(ctx));
    if (!replayed || (await files.messagesOfFile(ctx.db, fileId, [message.messageId])).size === 1)
      return { kind: "posted", answer };
    return { kind: "duplicate" };
  } catch (error) {
    if (error instanceof AppError && error.def.status < 500) return { kind: "refused", error };
    throw error;
  }
}
