import { parseArgs } from "node:util";
import { loadConfig } from "../config.ts";
import { createContext } from "../context.ts";
import { type Database, openDatabase } from "../db/database.ts";
import { migrate } from "../db/migrate.ts";
import { containsCardNumber } from "../domain/luhn.ts";
import { isRealDate } from "../domain/spei.ts";
import { AppError } from "../errors.ts";
import { formatPesos, parsePesosText, toPesos } from "../ledger/money.ts";
import { limits } from "../limits.ts";
import { main as serve } from "../main.ts";
import { forgetKeyFailures } from "../modules/auth/repository.ts";
import { createRootClient } from "../modules/clients/service.ts";
import { dailySettlement, settlementTimeZone } from "../modules/purchases/settlement.ts";
import { characterCount } from "../text.ts";

/**
 * The `emisor` command. Output meant for programs (--json) is exactly one JSON object on
 * stdout; everything for humans goes to stderr.
 */
const usage = `Usage:
  emisor serve                       run the service (the default)
  emisor migrate                     apply pending database migrations
  emisor tenant create --name NAME [--alias ALIAS] [--available 1000.00] [--json]
                                     create a root client with an API key
  emisor key unlock --api-key KEY    lift an API key's login lock (failed logins forgotten)
  emisor settlement --date YYYY-MM-DD [--json]
                                     what the issuer owes the card network for a Mexico City day
Environment: DATABASE_URL selects PostgreSQL; otherwise the embedded database in EMISOR_DATA_DIR.`;

/** Opens the configured database, applies pending migrations, runs `work`, closes. */
async function withDatabase<T>(work: (database: Database, applied: string[]) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    poolSize: 2,
    // As the server: behind PgBouncer in transaction mode a prepared statement must be off here too.
    preparedStatements: config.dbPreparedStatements,
    queryTimeoutMs: config.dbQueryTimeoutMs,
    warn: (message) => process.stderr.write(`${message}\n`),
  });
  try {
    const applied = await migrate(database);
    return await work(database, applied);
  } finally {
    await database.close();
  }
}

function defaultAlias(name: string): string {
  const alias = name
    .toUpperCase()
    .replace(/[^A-Z0-9]/g, "")
    .slice(0, 10);
  return alias.length >= 3 ? alias : alias.padEnd(3, "X");
}

/** The API's rules for required text: something besides spaces, no control characters, no card number. */
function checkText(value: string, flag: string): void {
  if (!/\S/.test(value)) throw new Error(`${flag} must not be blank`);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
  if (/[\u0000-\u001f\u007f]/.test(value)) throw new Error(`${flag} must not contain control characters`);
  if (containsCardNumber(value)) throw new Error(`${flag} must not contain a card number`);
}

async function tenantCreate(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      name: { type: "string" },
      alias: { type: "string" },
      available: { type: "string", default: "0" },
      json: { type: "boolean", default: false },
    },
  });
  // Characters as the API counts them (code points): an emoji is one, not two UTF-16 units.
  if (!values.name || characterCount(values.name) > 60) {
    throw new Error("--name is required (1-60 characters)");
  }
  checkText(values.name, "--name");
  const alias = values.alias ?? defaultAlias(values.name);
  const aliasCharacters = characterCount(alias);
  if (aliasCharacters < 3 || aliasCharacters > 10) throw new Error("--alias must be 3-10 characters");
  checkText(alias, "--alias");
  const availableCents = parsePesosText(values.available ?? "0", "--available", limits.fundingCentsMax);
  const config = loadConfig();
  // The funding account that pays --available is the sandbox's: outside it money reaches a
  // tenant the way it does in production, by SPEI to its CLABE.
  if (!config.sandbox && availableCents > 0n) {
    throw new Error("--available funds from the sandbox funding account: only with EMISOR_SANDBOX=true");
  }
  const result = await withDatabase(async (database) => {
    // Creating the context also creates the system key pair on a brand-new database.
    await createContext(config, database, (message: string) => process.stderr.write(`${message}\n`));
    return createRootClient(database.db, {
      name: values.name ?? "",
      alias,
      availableCents,
      clabeBankPrefix: config.clabeBankPrefix,
    });
  });
  const output = {
    client_id: result.clientId,
    code: result.code,
    name: values.name,
    alias,
    api_key_id: result.apiKey.id,
    api_key: result.apiKey.key,
    password: result.apiKey.password,
    available: toPesos(availableCents),
  };
  if (values.json) {
    process.stdout.write(`${JSON.stringify(output)}\n`);
  } else {
    process.stdout.write(
      `Created client ${output.code} (${output.client_id}) with ${output.available} MXN\n  api_key:  ${output.api_key}\n  password: ${output.password}\nThe password is not shown again.\n`,
    );
  }
}

/**
 * Forgets an API key's failed logins, lifting its lock (2008). Anyone who knows a key id can lock
 * it with wrong passwords (the price of a lock that stops guessing); this is the operator's way
 * to let its owner back in before the lock runs out.
 */
async function keyUnlock(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { "api-key": { type: "string" } } });
  const apiKey = values["api-key"];
  if (!apiKey) throw new Error("--api-key is required");
  const forgotten = await withDatabase(async (database) => forgetKeyFailures(database.db, apiKey));
  process.stderr.write(
    forgotten
      ? `${apiKey}: failed logins forgotten; it can log in again\n`
      : `${apiKey}: no failed logins recorded; nothing to unlock\n`,
  );
}

/**
 * The day's settlement with the card network, for the operator: clearings less returns plus return
 * reversals, for a Mexico City calendar day, from what the processor's messages posted.
 */
async function settlement(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { date: { type: "string" }, json: { type: "boolean", default: false } },
  });
  const date = values.date ?? "";
  if (!isRealDate(date)) throw new Error("--date is required, as YYYY-MM-DD (a Mexico City calendar day)");
  const day = await withDatabase(async (database) => dailySettlement(database.db, date));
  const tally = (t: { count: number; amountCents: bigint }) => ({
    count: t.count,
    amount: toPesos(t.amountCents),
  });
  const output = {
    date: day.date,
    time_zone: settlementTimeZone,
    from: day.from.toISOString(),
    until: day.until.toISOString(),
    clearings: tally(day.clearings),
    returns: tally(day.returns),
    return_reversals: tally(day.returnReversals),
    owed_to_network: toPesos(day.owedCents),
  };
  if (values.json) {
    process.stdout.write(`${JSON.stringify(output)}\n`);
    return;
  }
  const line = (name: string, t: { count: number; amountCents: bigint }) =>
    `  ${name.padEnd(18)} ${String(t.count).padStart(9)}  ${formatPesos(t.amountCents).padStart(18)}\n`;
  process.stdout.write(
    `Card network settlement for ${day.date} (${settlementTimeZone}, ${output.from} to ${output.until})\n` +
      line("clearings", day.clearings) +
      line("returns", day.returns) +
      line("return reversals", day.returnReversals) +
      `  ${"owed to network".padEnd(18)} ${"".padStart(9)}  ${formatPesos(day.owedCents).padStart(18)} MXN\n`,
  );
}

export async function run(argv: string[]): Promise<void> {
  const [command = "serve", sub, ...rest] = argv;
  if (command === "serve") return serve();
  if (command === "migrate") {
    const applied = await withDatabase(async (_database, applied) => applied);
    process.stderr.write(applied.length ? `applied: ${applied.join(", ")}\n` : "nothing to apply\n");
    return;
  }
  if (command === "tenant" && sub === "create") return tenantCreate(rest);
  if (command === "key" && sub === "unlock") return keyUnlock(rest);
  if (command === "settlement") return settlement(argv.slice(1));
  if (command === "help" || command === "--help" || command === "-h") {
    process.stdout.write(`${usage}\n`);
    return;
  }
  throw new Error(`unknown command: ${argv.join(" ")}\n${usage}`);
}

run(process.argv.slice(2)).catch((error: unknown) => {
  const message = error instanceof AppError || error instanceof Error ? error.message : String(error);
  process.stderr.write(`emisor: ${message}\n`);
  process.exit(1);
});
