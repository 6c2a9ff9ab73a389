import { CompiledQuery } from "kysely";
import { openDatabase } from "../../src/db/database.ts";
import type { Books } from "./checks.ts";

/**
 * The embedded engine's books, read the way the next start would find them: the data directory
 * opened in this process with Emisor's own code (its directory lock, its recovery of what a kill
 * leaves), while Emisor is stopped. PGlite has one process per directory, so the bank test on it
 * checks the books between a kill and the restart, never during the load.
 */
export async function withEmbeddedBooks<T>(dataDir: string, work: (books: Books) => Promise<T>): Promise<T> {
  const database = await openDatabase({ dataDir });
  try {
    return await work({
      sql: async <R>(_database: string, text: string, values: unknown[] = []) =>
        (await database.db.executeQuery<R>(CompiledQuery.raw(text, values))).rows,
    });
  } finally {
    await database.close();
  }
}
