import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { sql } from "kysely";
import type { Database } from "./database.ts";

/**
 * Forward-only migrations: `migrations/NNNN_name.sql`, applied in order, each file once, all
 * pending files in one transaction under an advisory lock so that several processes starting
 * together apply them once. A file that changed after it was applied stops the start: landed
 * migrations are not edited, a new file corrects them (the one exception: `correctedChecksums`).
 */
const migrationsDir = new URL("./migrations/", import.meta.url);

/**
 * Migrations corrected in place, with the checksums of their earlier texts. Only a correction
 * that changes nothing where the earlier text succeeded belongs here: it makes the migration
 * succeed on data an earlier release accepted, where the earlier text stopped the start.
 */
const correctedChecksums: Readonly<Record<string, readonly string[]>> = {
  "0011_institution_codes_as_numbers": ["5189393e0b3c8ad8abf718d80ee79f1218654e8d0365ea62bf8f2bda7f1cd7fd"],
  "0012_client_alias_normalized": ["feff6b541e2180e6caed7fd85ee99e3bd08081f831557b5c2afb97eb6aafc733"],
};
const lockKey = 7_421_001;

export interface MigrationFile {
  version: string;
  checksum: string;
  script: string;
}

export async function readMigrations(): Promise<MigrationFile[]> {
  const names = (await readdir(migrationsDir))
    .filter((name) => /^[0-9]{4}_[a-z0-9_]+\.sql$/.test(name))
    .sort();
  return Promise.all(
    names.map(async (name) => {
      const script = await readFile(new URL(name, migrationsDir), "utf8");
      return {
        version: name.replace(/\.sql$/, ""),
        checksum: createHash("sha256").update(script).digest("hex"),
        script,
      };
    }),
  );
}

/** Applies pending migrations; returns the versions applied now. */
export async function migrate(database: Database): Promise<string[]> {
  const files = await readMigrations();
  return database.db.transaction().execute(async (tx) => {
    await sql`select pg_advisory_xact_lock(${lockKey})`.execute(tx);
    await sql`create table if not exists schema_migrations (
      version text primary key,
      checksum text not null,
      applied_at timestamptz not null default now()
    )`.execute(tx);
    const applied = await sql<{ version: string; checksum: string }>`
      select version, checksum from schema_migrations`.execute(tx);
    const known = new Map(applied.rows.map((row) => [row.version, row.checksum]));
    const appliedNow: string[] = [];
    for (const file of files) {
      const checksum = known.get(file.version);
      if (checksum !== undefined) {
        if (checksum !== file.checksum && !correctedChecksums[file.version]?.includes(checksum)) {
          throw new Error(
            `migration ${file.version} was edited after it was applied; add a new migration instead`,
          );
        }
        continue;
      }
      try {
        await database.execScript(tx, file.script);
      } catch (error) {
        // Named, so that an operator knows which file and which rows to look at.
        throw new Error(`migration ${file.version} failed: ${(error as Error).message}`, { cause: error });
      }
      await sql`insert into schema_migrations (version, checksum) values (${file.version}, ${file.checksum})`.execute(
        tx,
      );
      appliedNow.push(file.version);
    }
    return appliedNow;
  });
}
