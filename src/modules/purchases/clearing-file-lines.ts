import { createHash } from "node:crypto";
import { setImmediate as nextTurn } from "node:timers/promises";
import type { AppContext } from "../../context.ts";
import type { Db } from "../../db/database.ts";
import { AppError, errors, invalidField } from "../../errors.ts";
import { readJsonText } from "../../http/json-body.ts";
import { bodyChecker, replaceUnstorable } from "../../http/validation.ts";
import { limits } from "../../limits.ts";
import type { CardRef } from "../cards/card-number.ts";
import * as files from "./clearing-file-repository.ts";
import { ClearingFileHeader, type ClearingFileHeaderType } from "./clearing-file-schemas.ts";
import type { FileLine, ReportBuilder } from "./clearing-report.ts";
import type { CardMessage } from "./message.ts";
import { CardMessageBody, type CardMessageBodyType } from "./schemas.ts";
import { messageOf } from "./service.ts";

/**
 * Reading a clearing file's lines from the upload's bytes. Each line is read twice: once to refuse
 * it or find its card (its lane), and again, a chunk at a time, when it is posted. Only where each
 * line is stays in memory in between (and a ciphered card number's reference, deciphered once),
 * not its message: a 100,000-line file's messages would take a quarter of production's heap.
 */

/** An upload's bytes, where each message line is in them (its number counts every line), its id. */
export interface SplitFile {
  raw: Buffer;
  fileId: string;
  lines: PendingLine[];
  digest: string;
}

/** Where a message line is; the reference of its card number when it gave one, deciphered. */
export interface PendingLine {
  line: number;
  start: number;
  end: number;
  deciphered?: CardRef;
}

/**
 * The upload's lines: the first is the header naming the file, the others its messages (blank
 * lines skipped, a CR before the LF dropped). The digest is the SHA-256 of the message lines as
 * sent, each ending in a LF: a repeat must send the same bytes.
 */
export function splitFile(raw: Buffer): SplitFile {
  const lines: PendingLine[] = [];
  let header: PendingLine | undefined;
  const digest = createHash("sha256");
  for (let start = 0, line = 1; start < raw.length; line++) {
    const newline = raw.indexOf(10, start);
    const next = newline < 0 ? raw.length : newline + 1;
    let end = newline < 0 ? raw.length : newline;
    if (end > start && raw[end - 1] === 13) end--;
    if (!isBlank(raw, start, end)) {
      if (!header) header = { line, start, end };
      else {
        lines.push({ line, start, end });
        digest.update(raw.subarray(start, end)).update("\n");
      }
    }
    start = next;
  }
  if (!header)
    throw new AppError(errors.bodyRequired, { message: 'A first line {"file_id": ...} is required' });
  if (lines.length === 0) throw invalidField("lines", "minItems", "the file has no message lines");
  if (lines.length > limits.clearingFileLinesMax)
    throw invalidField("lines", "maxItems", `must be at most ${limits.clearingFileLinesMax} message lines`);
  const fileId = readHeader(raw.subarray(header.start, header.end));
  return { raw, fileId, lines, digest: digest.digest("hex") };
}

function isBlank(raw: Buffer, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (raw[i] !== 0x20 && raw[i] !== 0x09) return false;
  return true;
}

const checkHeader = bodyChecker(ClearingFileHeader);

function readHeader(bytes: Buffer): string {
  const header = readJsonText(bytes);
  const refusal = checkHeader(header);
  if (refusal) throw refusal;
  return (header as ClearingFileHeaderType).file_id;
}

const checkLine = bodyChecker(CardMessageBody);

/** One line read as a message, or the error that refuses it (the one the messages route gives). */
async function readLine(ctx: AppContext, file: SplitFile, at: PendingLine): Promise<FileLine> {
  const line = at.line;
  let value: unknown;
  try {
    // Text is stored as the rail sends it, as on the messages route (rails/routes.ts).
    value = replaceUnstorable(readJsonText(file.raw.subarray(at.start, at.end)));
  } catch (error) {
    if (error instanceof AppError) return { line, messageId: null, refusal: error };
    throw error;
  }
  const id = (value as { message_id?: unknown } | null)?.message_id;
  const messageId = typeof id === "string" ? id : null;
  const refusal = checkLine(value);
  if (refusal) return { line, messageId, refusal };
  const body = value as CardMessageBodyType;
  if (body.type !== "CLEARING" && body.type !== "RETURN")
    return { line, messageId, refusal: invalidField("type", "enum", "must be CLEARING or RETURN in a file") };
  try {
    return { line, messageId, message: await messageOf(ctx, body, file.fileId, at.deciphered) };
  } catch (error) {
    if (error instanceof AppError && error.def.status < 500) return { line, messageId, refusal: error };
    throw error;
  }
}

/** Lines read a batch at a time (card numbers deciphered on the RSA workers meanwhile). */
export async function readLines(ctx: AppContext, file: SplitFile, lines: PendingLine[]): Promise<FileLine[]> {
  return Promise.all(lines.map((at) => readLine(ctx, file, at)));
}

/**
 * The first read: refused lines and repeats (a message_id already on an earlier line of the file)
 * go to the report; the others are put in lanes by card, each lane in file order. Lanes run at
 * once and never share a card, so no lane waits for another's card locks, and one card's lines
 * apply in the file's order. Reads a batch per turn of the event loop, so other requests run.
 */
export async function scanLines(
  ctx: AppContext,
  file: SplitFile,
  report: ReportBuilder,
): Promise<PendingLine[][]> {
  const seen = new Set<string>();
  const kept: Array<{ at: PendingLine; key: string }> = [];
  for (let from = 0; from < file.lines.length; from += limits.clearingFileParseBatch) {
    const batch = file.lines.slice(from, from + limits.clearingFileParseBatch);
    const read = await readLines(ctx, file, batch);
    read.forEach((line, i) => {
      const at = batch[i] as PendingLine;
      if (line.refusal) report.add(line, { kind: "refused", error: line.refusal });
      else if (seen.has(line.messageId ?? "")) report.add(line, { kind: "duplicate" });
      else {
        seen.add(line.messageId ?? "");
        const card = line.message?.card;
        if (card && "fingerprint" in card) at.deciphered = card;
        kept.push({ at, key: laneKey(line.message) });
      }
    });
    await nextTurn();
  }
  return laneLines(ctx.db, kept);
}

/** What finds a line's card: its authorization, its card's id, or its card number's fingerprint. */
function laneKey(message: CardMessage | undefined): string {
  if (message?.authorizationId) return `a:${message.authorizationId}`;
  const card = message?.card;
  return card && "fingerprint" in card ? `f:${card.fingerprint}` : `c:${card?.id ?? ""}`;
}

async function laneLines(db: Db, kept: Array<{ at: PendingLine; key: string }>): Promise<PendingLine[][]> {
  const cards = new Map<string, string>();
  const unknown = [...new Set(kept.map(({ key }) => key).filter((key) => !key.startsWith("c:")))];
  // In slices: one query for 100,000 ids would hold all their rows in memory at once.
  for (let from = 0; from < unknown.length; from += 10_000) {
    const slice = unknown.slice(from, from + 10_000);
    const found = await files.cardsOfLines(
      db,
      slice.filter((key) => key.startsWith("a:")).map((key) => key.slice(2)),
      slice.filter((key) => key.startsWith("f:")).map((key) => key.slice(2)),
    );
    for (const [id, card] of found.byAuthorization) cards.set(`a:${id}`, card);
    for (const [fingerprint, card] of found.byFingerprint) cards.set(`f:${fingerprint}`, card);
  }
  const lanes: PendingLine[][] = Array.from({ length: limits.clearingFileLanes }, () => []);
  for (const { at, key } of kept) {
    // A line whose card is not known is refused when posted, in any lane.
    const card = key.startsWith("c:") ? key.slice(2) : (cards.get(key) ?? String(at.line));
    lanes[laneOf(card)]?.push(at);
  }
  return lanes.filter((lane) => lane.length > 0);
}

function laneOf(key: string): number {
  let hash = 2166136261;
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 16777619);
  return (hash >>> 0) % limits.clearingFileLanes;
}
