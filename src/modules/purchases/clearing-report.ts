import type { AppError } from "../../errors.ts";
import type { ClearingFileReport } from "./clearing-file-schemas.ts";
import type { CardMessage } from "./message.ts";
import type { MessageAnswer } from "./service.ts";

/** One line of a clearing file: its 1-based position, its message once it parsed, or its refusal. */
export interface FileLine {
  line: number;
  messageId: string | null;
  message?: CardMessage;
  refusal?: AppError;
}

/** What became of a line: posted (now, or by an earlier upload of the file), a repeat, or refused. */
export type LineResult =
  | { kind: "posted"; answer: MessageAnswer }
  | { kind: "duplicate" }
  | { kind: "refused"; error: AppError };

/**
 * The file's reconciliation report, added to line by line in any order (the lanes finish in
 * theirs) and listed in line order at the end. A posted line counts by its answer, so a line
 * posted by an earlier upload of the same file counts as it did then.
 */
export class ReportBuilder {
  readonly #fileId: string;
  readonly #lines: number;
  readonly #digest: string;
  // Centavos as bigint until the report is written: 100,000 lines of the largest amount still fit
  // a JSON number exactly, but money is summed as bigint everywhere.
  readonly #tallies = {
    matched: { count: 0, amount: 0n },
    force_posts: { count: 0, amount: 0n },
    returns: { count: 0, amount: 0n },
  };
  readonly #over: ClearingFileReport["over_tolerance"]["lines"] = [];
  #overAmount = 0n;
  readonly #duplicates: ClearingFileReport["duplicates"]["lines"] = [];
  #duplicateAmount = 0n;
  readonly #refused: ClearingFileReport["refused"]["lines"] = [];

  constructor(fileId: string, lines: number, digest: string) {
    this.#fileId = fileId;
    this.#lines = lines;
    this.#digest = digest;
  }

  add(line: FileLine, result: LineResult): void {
    const ref = { line: line.line, message_id: line.messageId };
    if (result.kind === "refused") {
      this.#refused.push({ ...ref, code: result.error.def.code, message: result.error.message });
    } else if (result.kind === "duplicate") {
      this.#duplicates.push(ref);
      this.#duplicateAmount += line.message?.amountCents ?? 0n;
    } else {
      this.#posted(line, ref, result.answer);
    }
  }

  #posted(line: FileLine, ref: { line: number; message_id: string | null }, answer: MessageAnswer): void {
    const message = line.message;
    const tally =
      message?.type === "RETURN"
        ? this.#tallies.returns
        : message?.authorizationId
          ? this.#tallies.matched
          : this.#tallies.force_posts;
    tally.count += 1;
    tally.amount += BigInt(answer.amount);
    if (answer.over_tolerance) {
      this.#over.push({ ...ref, authorization_id: answer.authorization_id });
      this.#overAmount += BigInt(answer.amount);
    }
  }

  report(): ClearingFileReport {
    const byLine = (a: { line: number }, b: { line: number }) => a.line - b.line;
    const { matched, force_posts, returns } = this.#tallies;
    const tally = (t: { count: number; amount: bigint }) => ({ count: t.count, amount: Number(t.amount) });
    return {
      file_id: this.#fileId,
      lines: this.#lines,
      lines_sha256: this.#digest,
      matched: tally(matched),
      force_posts: tally(force_posts),
      returns: tally(returns),
      net: Number(matched.amount + force_posts.amount - returns.amount),
      over_tolerance: {
        count: this.#over.length,
        amount: Number(this.#overAmount),
        lines: this.#over.sort(byLine),
      },
      duplicates: {
        count: this.#duplicates.length,
        amount: Number(this.#duplicateAmount),
        lines: this.#duplicates.sort(byLine),
      },
      refused: { count: this.#refused.length, lines: this.#refused.sort(byLine) },
      processed_at: new Date().toISOString(),
    };
  }
}
