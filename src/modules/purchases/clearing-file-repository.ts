import { sql } from "kysely";
import type { Queryable } from "../../db/database.ts";

/** SQL of clearing files: the file's row (its digest, then its report) and the lines' cards. */

/** What a file's row holds while its lines are being processed: the digest a repeat must match. */
export interface FileInProgress {
  lines_sha256: string;
  processing: true;
}

/**
 * The file's row, written on its first upload with the digest of its lines: a repeat (or a retry
 * after a crash half-way) finds it, with the report once the first upload finished.
 */
export async function startFile(
  db: Queryable,
  fileId: string,
  lines: number,
  digest: string,
): Promise<Record<string, unknown>> {
  const marker: FileInProgress = { lines_sha256: digest, processing: true };
  await sql`
    insert into card_clearing_files (file_id, lines, report) values (${fileId}, ${lines}, ${JSON.stringify(marker)}::jsonb)
    on conflict (file_id) do nothing`.execute(db);
  return storedReport(db, fileId);
}

export async function storedReport(db: Queryable, fileId: string): Promise<Record<string, unknown>> {
  const row = await db
    .selectFrom("card_clearing_files")
    .select("report")
    .where("file_id", "=", fileId)
    .executeTakeFirstOrThrow();
  return row.report as Record<string, unknown>;
}

/**
 * Stores the report, unless another upload of the same file stored one first (two uploads may run
 * at once: a processor retrying a slow one); the stored report is the answer either way.
 */
export async function finishFile(
  db: Queryable,
  fileId: string,
  report: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  await sql`
    update card_clearing_files set report = ${JSON.stringify(report)}::jsonb
    where file_id = ${fileId} and report ? 'processing'`.execute(db);
  return storedReport(db, fileId);
}

/** The card of each authorization named, and of each card number fingerprint, where they exist. */
export async function cardsOfLines(
  db: Queryable,
  authorizationIds: string[],
  fingerprints: string[],
): Promise<{ byAuthorization: Map<string, string>; byFingerprint: Map<string, string> }> {
  const authorizations =
    authorizationIds.length === 0
      ? []
      : (
          await sql<{ id: string; card_id: string }>`
            select id, card_id from card_authorizations where id = any(${authorizationIds}::uuid[])`.execute(
            db,
          )
        ).rows;
  const cards =
    fingerprints.length === 0
      ? []
      : (
          await sql<{ id: string; pan_fingerprint: string }>`
            select id, pan_fingerprint from cards where pan_fingerprint = any(${fingerprints}::text[])`.execute(
            db,
          )
        ).rows;
  return {
    byAuthorization: new Map(authorizations.map((row) => [row.id, row.card_id])),
    byFingerprint: new Map(cards.map((row) => [row.pan_fingerprint, row.id])),
  };
}

/** Which of the messages were recorded by this file (a retried upload finds its earlier lines). */
export async function messagesOfFile(
  db: Queryable,
  fileId: string,
  messageIds: string[],
): Promise<Set<string>> {
  if (messageIds.length === 0) return new Set();
  const result = await sql<{ message_id: string }>`
    select message_id from card_network_messages
    where message_id = any(${messageIds}::text[]) and file_id = ${fileId}`.execute(db);
  return new Set(result.rows.map((row) => row.message_id));
}
