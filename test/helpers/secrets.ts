import { execFileSync } from "node:child_process";
import { appendFileSync, writeFileSync } from "node:fs";
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from "fastify";
import { sql } from "kysely";
import type { AppContext } from "../../src/context.ts";
import { open } from "../../src/crypto/vault.ts";

/**
 * Secret hygiene across the whole suite (PCI DSS 3.3.1.3, 3.4.1, 3.5.1, 8.3). Every test file's
 * app records the secrets it sees issued (passwords and PINs sent, tokens and signing secrets
 * handed out, private keys made by the tests) and, when it closes, the PANs it minted and the
 * system private key, together with every response body it answered and a dump of its database.
 * `test/post-suite/secrets.test.ts` then looks for every recorded secret in every log line,
 * response and dump of the run: one leak anywhere fails the suite.
 */
export type SecretKind =
  | "pan"
  | "pin"
  | "password"
  | "token"
  | "private_key"
  | "signing_secret"
  | "master_key";

export interface SecretsFile {
  secrets: { kind: SecretKind; value: string }[];
}

/** Where a secret may legitimately appear in a response: the one answer that hands it out. */
export const issuingRoutes: Record<string, SecretKind[]> = {
  "POST /v1/auth/login": ["token"],
  "POST /v1/webhooks": ["signing_secret"],
  "POST /v1/webhooks/:id/rotate_secret": ["signing_secret"],
  "PUT /v1/clients/authorization_endpoint": ["signing_secret"],
  "POST /v1/clients/authorization_endpoint/rotate_secret": ["signing_secret"],
};

const processSecrets: { kind: SecretKind; value: string }[] = [];

/** For secrets made outside an app (the tests' own RSA private keys). */
export function recordSecret(kind: SecretKind, value: string): void {
  if (value.length > 0) processSecrets.push({ kind, value });
}

const requestSecretKeys: [RegExp, SecretKind][] = [
  [/password/i, "password"],
  [/^(pin|new_pin|current_pin|old_pin)$/i, "pin"],
];
const responseSecretKeys: [RegExp, SecretKind][] = [
  [/password/i, "password"],
  [/^token$/i, "token"],
  [/secret$/i, "signing_secret"],
];

function walk(
  value: unknown,
  keys: [RegExp, SecretKind][],
  found: (kind: SecretKind, value: string) => void,
): void {
  if (Array.isArray(value)) {
    for (const item of value) walk(item, keys, found);
    return;
  }
  if (value === null || typeof value !== "object") return;
  for (const [key, inner] of Object.entries(value)) {
    if (typeof inner === "string") {
      for (const [pattern, kind] of keys) if (pattern.test(key)) found(kind, inner);
    } else walk(inner, keys, found);
  }
}

function parse(text: string | undefined): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Wraps `app.inject` (the front door every test uses) to record request secrets and write every
 * response to `<base>.responses.log` as `<METHOD> <route>\t<status>\t<body>` lines.
 */
export function recordTraffic(app: FastifyInstance, base: string): { secrets: SecretsFile["secrets"] } {
  const secrets: SecretsFile["secrets"] = [];
  const add = (kind: SecretKind, value: string) => {
    if (value.length > 0) secrets.push({ kind, value });
  };
  const inject = app.inject.bind(app) as (options: InjectOptions | string) => Promise<LightMyRequestResponse>;
  const wrapped = async (options: InjectOptions | string): Promise<LightMyRequestResponse> => {
    const response = await inject(options);
    // A password or PIN becomes a secret when it is accepted (a login, a new API key, a PIN
    // set); what a refused request carried (a fuzzer's junk) was never anyone's credential.
    if (typeof options === "object" && response.statusCode < 300) {
      const payload = typeof options.payload === "string" ? parse(options.payload) : options.payload;
      walk(payload, requestSecretKeys, add);
    }
    const method = response.raw.req.method ?? "GET";
    const route = routeOf(response.raw.req.url ?? "/");
    const authorization = response.headers.authorization;
    if (typeof authorization === "string") add("token", authorization.replace(/^Bearer /, ""));
    walk(parse(response.body), responseSecretKeys, add);
    appendFileSync(
      `${base}.responses.log`,
      `${method} ${route}\t${response.statusCode}\t${response.body.replaceAll("\n", "\\n")}\n`,
    );
    return response;
  };
  (app as unknown as { inject: typeof wrapped }).inject = wrapped;
  return { secrets };
}

/** The path with ids as `:id`, to tell the routes that hand secrets out. */
function routeOf(url: string): string {
  return (url.split("?")[0] ?? url).replace(/\/[0-9a-f]{8}-[0-9a-f-]{27}(?=\/|$)/gi, "/:id");
}

/**
 * At close: the PANs the app minted and its system private key (both only sealed in the
 * database), a dump of the database (pg_dump on PostgreSQL, every row as text on PGlite), and the
 * secrets file for the post-suite scan.
 */
export async function writeSecrets(
  ctx: AppContext,
  base: string,
  traffic: { secrets: SecretsFile["secrets"] },
  databaseUrl: string | undefined,
): Promise<void> {
  const cards = await ctx.db.selectFrom("cards").select(["id", "pan_sealed"]).execute();
  const pans = cards.map((card) => ({
    kind: "pan" as const,
    value: open(ctx.keys.vault, card.pan_sealed, card.id),
  }));
  const systemKey = await ctx.db
    .selectFrom("system_keys")
    .select(["id", "private_key_sealed"])
    .executeTakeFirstOrThrow();
  const privatePem = open(ctx.keys.wrap, systemKey.private_key_sealed, systemKey.id);
  const secrets: SecretsFile["secrets"] = [
    ...pans,
    ...traffic.secrets,
    ...processSecrets.splice(0),
    { kind: "private_key", value: privatePem },
    ...(ctx.config.masterKey ? [{ kind: "master_key" as const, value: ctx.config.masterKey }] : []),
  ];
  writeFileSync(`${base}.secrets.json`, JSON.stringify({ secrets } satisfies SecretsFile));
  writeFileSync(`${base}.dump.sql`, await dumpDatabase(ctx, databaseUrl));
}

async function dumpDatabase(ctx: AppContext, databaseUrl: string | undefined): Promise<string> {
  if (databaseUrl)
    return execFileSync("pg_dump", ["--data-only", databaseUrl], { maxBuffer: 1 << 30 }).toString();
  const tables = await sql<{ name: string }>`
    select tablename as name from pg_tables where schemaname = 'public' order by tablename`.execute(ctx.db);
  const lines: string[] = [];
  for (const { name } of tables.rows) {
    const rows = await sql<{ row: string }>`select t::text as row from ${sql.table(name)} t`.execute(ctx.db);
    for (const { row } of rows.rows) lines.push(`${name}\t${row}`);
  }
  return `${lines.join("\n")}\n`;
}
