import { accessSync, closeSync, constants, openSync, statSync } from "node:fs";
import { isIP } from "node:net";
import path from "node:path";
import { parseMasterKey } from "./crypto/keys.ts";
import { parseDatabaseUrl } from "./db/hosts.ts";
import { limits } from "./limits.ts";
import { transferInstitutions } from "./modules/catalogs/data.ts";

/**
 * Every environment variable Emisor reads, parsed once at start. The configuration table of
 * docs/operations.md lists the same names; test/docs.test.ts keeps the two in step.
 */
export interface Config {
  host: string;
  port: number;
  /**
   * The admin port (/metrics, /docs, /openapi.json, /health, /ready), when set; the public port
   * then serves none of the first three. `adminHost` defaults to `host`.
   */
  adminPort: number | undefined;
  adminHost: string;
  /** PostgreSQL connection string; when absent the embedded PGlite engine is used. */
  databaseUrl: string | undefined;
  /**
   * A streaming replica of DATABASE_URL's primary for the heavy listings, read once it has
   * replayed every write committed before the listing began (docs/design.md, "Read replica").
   */
  databaseReadUrl: string | undefined;
  /** Where PGlite keeps its files and where the generated master key lives. */
  dataDir: string;
  /** 32 bytes, hex or Base64; derives every other at-rest key. */
  masterKey: string | undefined;
  tokenTtlSeconds: number;
  /** Sandbox mode: first-start tenant, /v1/sandbox routes, http://localhost webhooks. */
  sandbox: boolean;
  logLevel: string;
  dbPoolSize: number;
  /** PostgreSQL: a statement unanswered this long drops its connection and the request gets 503. */
  dbQueryTimeoutMs: number;
  /** PostgreSQL: distinct statement texts prepared per connection; 0 for PgBouncer's transaction mode. */
  dbPreparedStatements: number;
  /** Seconds an API key's status and revoked tokens may be cached by one process. */
  authCacheSeconds: number;
  /** Minimum length of new API key passwords (the contract allows 1-30; we require more). */
  apiKeyPasswordMinLength: number;
  /** Money-moving requests per second allowed to one API key (token bucket). 0 disables. */
  rateLimitPerSecond: number;
  /** First three digits of every collection CLABE Emisor issues (the participant's bank code). */
  clabeBankPrefix: string;
  /** Shared secret the SPEI rail signs incoming-transfer callbacks with. */
  speiWebhookSecret: string | undefined;
  /** Shared secret the card processor signs its messages and clearing files with. */
  cardNetworkSecret: string | undefined;
  /** Days an authorization's hold lasts before the expiry worker releases it. */
  holdDays: number;
  /** The same for hotels and car rentals, whose final amount comes later. */
  lodgingHoldDays: number;
  /** Background workers (rail dispatch, webhooks) run in this process. */
  workers: boolean;
  /** The proxies whose X-Forwarded-For entries are trusted (Fastify's list form), or false. */
  trustProxy: false | string;
  /** SPEI simulator: how long after acceptance an order settles or is returned. */
  speiSimSettleMs: number;
  /** SPEI simulator: share (0..1) of accepted orders returned with a Banxico cause. */
  speiSimReturnProbability: number;
  /** SPEI simulator: share (0..1) of submissions failing as if the rail were unreachable. */
  speiSimUnavailableProbability: number;
  /** SPEI simulator: append-only journal file, so a restarted simulator remembers its orders. */
  speiSimJournal: string | undefined;
  /** Airtime simulator: how long the provider takes to answer. */
  airtimeSimDelayMs: number;
  /** Airtime simulator: share (0..1) of top-ups the provider fails. */
  airtimeSimFailureProbability: number;
}

/** The participant prefix of collection CLABEs when EMISOR_CLABE_BANK_PREFIX is unset (STP). */
export const defaultClabeBankPrefix = "646";

/** Names of every variable read below, for test/docs.test.ts. */
export const configVariables = [
  "HOST",
  "PORT",
  "EMISOR_ADMIN_PORT",
  "EMISOR_ADMIN_HOST",
  "DATABASE_URL",
  "DATABASE_READ_URL",
  "EMISOR_DATA_DIR",
  "EMISOR_MASTER_KEY",
  "EMISOR_TOKEN_TTL_SECONDS",
  "EMISOR_SANDBOX",
  "LOG_LEVEL",
  "EMISOR_DB_POOL_SIZE",
  "EMISOR_DB_QUERY_TIMEOUT_MS",
  "EMISOR_DB_PREPARED_STATEMENTS",
  "EMISOR_AUTH_CACHE_SECONDS",
  "EMISOR_API_KEY_PASSWORD_MIN_LENGTH",
  "EMISOR_RATE_LIMIT_PER_SECOND",
  "EMISOR_CLABE_BANK_PREFIX",
  "EMISOR_SPEI_WEBHOOK_SECRET",
  "EMISOR_CARD_NETWORK_SECRET",
  "EMISOR_HOLD_DAYS",
  "EMISOR_HOLD_DAYS_LODGING",
  "EMISOR_WORKERS",
  "EMISOR_TRUST_PROXY",
  "EMISOR_SIM_SPEI_SETTLE_MS",
  "EMISOR_SIM_SPEI_RETURN_PROBABILITY",
  "EMISOR_SIM_SPEI_UNAVAILABLE_PROBABILITY",
  "EMISOR_SIM_SPEI_JOURNAL",
  "EMISOR_SIM_AIRTIME_DELAY_MS",
  "EMISOR_SIM_AIRTIME_FAILURE_PROBABILITY",
] as const;

type Env = Record<string, string | undefined>;

export class ConfigError extends Error {}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^[0-9]+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}`);
  return value;
}

/**
 * The airtime simulator's delay stays below the provider call's timeout: an answer slower than the
 * call waits is never received, and every top-up would stay PENDING, its debit held.
 */
function airtimeSimDelay(env: Env): number {
  const name = "EMISOR_SIM_AIRTIME_DELAY_MS";
  const value = integer(env, name, 300, 0, Number.MAX_SAFE_INTEGER);
  if (value >= limits.railCallTimeoutMs)
    throw new ConfigError(
      `${name} must be below ${limits.railCallTimeoutMs} (the provider call's timeout, ms): a slower answer is never received`,
    );
  return value;
}

const trueWords = ["1", "true", "yes", "on"];
const falseWords = ["0", "false", "no", "off"];

function boolean(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (trueWords.includes(raw.toLowerCase())) return true;
  if (falseWords.includes(raw.toLowerCase())) return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

/**
 * The proxies whose X-Forwarded-For entries are believed, as Fastify takes them: false, or a
 * comma-separated list of addresses, CIDR ranges and the names `loopback`, `linklocal` and
 * `uniquelocal`. `true` is the load balancer on this machine or the private network
 * ("loopback,linklocal,uniquelocal"). The caller's address is the rightmost entry not written by a
 * trusted proxy; trusting every hop (Fastify's `true`) would make it the leftmost, which the caller
 * writes itself.
 */
const proxyPresets = new Set(["loopback", "linklocal", "uniquelocal"]);
function trustedProxies(env: Env, name: string): false | string {
  const raw = (env[name] ?? "").trim();
  if (raw === "" || falseWords.includes(raw.toLowerCase())) return false;
  if (trueWords.includes(raw.toLowerCase())) return "loopback,linklocal,uniquelocal";
  const entries = raw.split(",").map((entry) => entry.trim());
  for (const entry of entries) {
    const [address = "", prefix, extra] = entry.split("/");
    const family = isIP(address);
    const bits = family === 4 ? 32 : 128;
    const valid =
      proxyPresets.has(entry) ||
      (family !== 0 &&
        extra === undefined &&
        (prefix === undefined || (/^[0-9]{1,3}$/.test(prefix) && Number(prefix) <= bits)));
    if (!valid)
      throw new ConfigError(
        `${name} must be true, false or a comma-separated list of proxy addresses, CIDR ranges, loopback, linklocal or uniquelocal; got "${entry}"`,
      );
    // A range of every address trusts every hop: the caller would choose its own address (and
    // with it the login limits) by writing X-Forwarded-For.
    if (prefix !== undefined && Number(prefix) === 0)
      throw new ConfigError(
        `${name} must not trust every address ("${entry}"): name your proxies' addresses or ranges`,
      );
  }
  return entries.join(",");
}

/**
 * Sandbox mode is on when EMISOR_SANDBOX is unset. Set but empty (a template that lost its value)
 * stops the start: taken as unset it would turn on the routes that create money.
 */
function sandboxMode(env: Env): boolean {
  if (env.EMISOR_SANDBOX !== undefined && env.EMISOR_SANDBOX.trim() === "")
    throw new ConfigError("EMISOR_SANDBOX is set but empty: set it to true or false");
  return boolean(env, "EMISOR_SANDBOX", true);
}

function probability(env: Env, name: string): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return 0;
  const value = Number(raw);
  if (!/^(0\.?|1\.?|0?\.[0-9]+|0\.[0-9]+|1\.0*)$/.test(raw) || value < 0 || value > 1) {
    throw new ConfigError(`${name} must be a number from 0 to 1, got "${raw}"`);
  }
  return value;
}

function optional(env: Env, name: string): string | undefined {
  const raw = env[name];
  return raw === undefined || raw === "" ? undefined : raw;
}

/** pino's levels, the accepted values of LOG_LEVEL. */
const logLevels = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

function logLevel(env: Env): string {
  const raw = env.LOG_LEVEL;
  if (raw === undefined || raw === "") return "info";
  const level = raw.trim().toLowerCase();
  if (!logLevels.includes(level))
    throw new ConfigError(`LOG_LEVEL must be one of ${logLevels.join(", ")}; got "${raw}"`);
  return level;
}

const hostLabel = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
const hostName = new RegExp(`^${hostLabel}(?:\\.${hostLabel})*\\.?$`);

/**
 * The address to listen on: an IP address or a host name. A name that does not resolve, or an
 * address this machine does not have, is found by listen (see runServer).
 */
function listenHost(env: Env, name = "HOST", fallback = "127.0.0.1"): string {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const valid = isIP(raw) !== 0 || (raw.length <= 253 && hostName.test(raw) && !/^[0-9.]+$/.test(raw));
  if (!valid)
    throw new ConfigError(
      `${name} must be an IP address (127.0.0.1, 0.0.0.0, ::) or a host name (localhost), without brackets or a port; got "${raw}"`,
    );
  return raw;
}

/**
 * A PostgreSQL URL as node-postgres reads it. Without this check a value that is not one reached
 * pg, which read "notaurl" as a path under the host "base" and `mysql://x` as the host x, and
 * answered "getaddrinfo ENOTFOUND base" or "Invalid URL". The value is never echoed: it may hold
 * a password.
 */
function databaseUrl(env: Env, name = "DATABASE_URL"): string | undefined {
  const raw = optional(env, name);
  if (raw === undefined) return undefined;
  let parsed: ReturnType<typeof parseDatabaseUrl>;
  try {
    parsed = parseDatabaseUrl(raw);
  } catch (error) {
    throw new ConfigError(`${name}: ${(error as Error).message}`);
  }
  // Several hosts: each was checked by the parser; the rest of the URL is checked on the first's.
  checkPostgresUrl(name, parsed ? parsed.urlFor(parsed.hosts[0] ?? { host: "h", port: 5432 }) : raw);
  return raw;
}

function checkPostgresUrl(name: string, raw: string): void {
  const form = "postgres://user:password@host:5432/database (or postgresql://)";
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(raw)?.[1]?.toLowerCase();
  if (scheme !== "postgres" && scheme !== "postgresql")
    throw new ConfigError(`${name} must be a PostgreSQL URL, ${form}; it does not start with postgres://`);
  const authority = raw.slice(scheme.length + 3).split(/[/?#]/)[0] ?? "";
  const hostAndPort = authority.slice(authority.lastIndexOf("@") + 1);
  const port = /^(?:\[[^\]]*\]|[^:]*):(.*)$/.exec(hostAndPort)?.[1];
  if (
    port !== undefined &&
    port !== "" &&
    !(/^[0-9]{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65535)
  )
    // Not echoed either: with an unencoded "/", "?" or "#" in the password, what reads as the port
    // here is part of the password.
    throw new ConfigError(
      `${name}'s port must be a number from 1 to 65535 (special characters in the user name or password must be percent-encoded)`,
    );
  // As pg-connection-string parses it: spaces and stray % signs encoded, an empty host allowed
  // before a path (the socket directory then comes in ?host=).
  const text = / |%[^a-f0-9]|%[a-f0-9][^a-f0-9]/i.test(raw)
    ? encodeURI(raw).replace(/%25(\d\d)/g, "%$1")
    : raw;
  if (!URL.canParse(text) && !URL.canParse(text.replace("@/", "@___DUMMY___/")))
    throw new ConfigError(
      `${name} must be a PostgreSQL URL, ${form}; it is not a valid URL (special characters in the user name or password must be percent-encoded)`,
    );
}

/** A replica for the heavy listings: only beside a primary of DATABASE_URL. */
function databaseReadUrl(env: Env, primary: string | undefined): string | undefined {
  const url = databaseUrl(env, "DATABASE_READ_URL");
  if (url !== undefined && primary === undefined)
    throw new ConfigError("DATABASE_READ_URL needs DATABASE_URL: the embedded engine has no replicas");
  return url;
}

/** Checked here, before the database is opened, rather than when the keys are first derived. */
function masterKey(env: Env): string | undefined {
  const raw = optional(env, "EMISOR_MASTER_KEY");
  if (raw === undefined) return undefined;
  try {
    parseMasterKey(raw);
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
  return raw;
}

/**
 * A rail signs with its secret exactly as written; white space around it (a pasted line) would
 * make every callback's signature fail, and a blank one is no secret.
 */
function signingSecret(env: Env, name: string): string | undefined {
  const raw = optional(env, name);
  if (raw !== undefined && (raw.trim() === "" || raw.trim() !== raw))
    throw new ConfigError(`${name} must not be blank or begin or end with white space`);
  return raw;
}

/**
 * The data directory, checked when it will be used (the embedded engine, or the generated master
 * key of a sandbox without EMISOR_MASTER_KEY): it, or the nearest of its parents that exists, must
 * be a directory this process can write to. Nothing is created here.
 */
function dataDirectory(env: Env, used: boolean): string {
  const dir = path.resolve(env.EMISOR_DATA_DIR || "./.emisor/data");
  if (!used) return dir;
  const refuse = (why: string) =>
    new ConfigError(`EMISOR_DATA_DIR must be a directory Emisor can create or write to; ${why}`);
  for (let candidate = dir; ; candidate = path.dirname(candidate)) {
    let stats: ReturnType<typeof statSync>;
    try {
      stats = statSync(candidate, { throwIfNoEntry: false });
    } catch (error) {
      // ENOTDIR: a parent is a file, found on the way up.
      if ((error as NodeJS.ErrnoException).code === "ENOTDIR") continue;
      throw refuse((error as Error).message);
    }
    if (stats === undefined) continue;
    if (!stats.isDirectory()) throw refuse(`${candidate} is not a directory`);
    try {
      accessSync(candidate, constants.W_OK | constants.X_OK | (candidate === dir ? constants.R_OK : 0));
    } catch (error) {
      throw refuse(`${candidate} is not writable (${(error as NodeJS.ErrnoException).code})`);
    }
    return dir;
  }
}

/**
 * The simulator's journal is opened as it will be, for reading and appending (created when
 * missing, never truncated), so a path it cannot use stops the start instead of the first order.
 */
function speiSimJournal(env: Env): string | undefined {
  const file = optional(env, "EMISOR_SIM_SPEI_JOURNAL");
  if (file === undefined) return undefined;
  try {
    closeSync(openSync(file, "a+"));
  } catch (error) {
    throw new ConfigError(
      `EMISOR_SIM_SPEI_JOURNAL must be a file Emisor can create or append to (${(error as Error).message})`,
    );
  }
  return file;
}

/**
 * EMISOR_ADMIN_PORT: unset, the public port serves everything. It may not be PORT itself (0, a
 * free port each, excepted): both listeners would fight for it.
 */
function adminPort(env: Env, port: number): number | undefined {
  const raw = optional(env, "EMISOR_ADMIN_PORT");
  if (raw === undefined) return undefined;
  const value = integer(env, "EMISOR_ADMIN_PORT", 0, 0, 65535);
  if (value !== 0 && value === port)
    throw new ConfigError(`EMISOR_ADMIN_PORT must differ from PORT (${port}): unset it to serve all on PORT`);
  return value;
}

export function loadConfig(env: Env = process.env): Config {
  const clabeBankPrefix = env.EMISOR_CLABE_BANK_PREFIX || defaultClabeBankPrefix;
  // A CLABE whose bank code belongs to no SPEI participant can never receive a transfer.
  if (!transferInstitutions.some((item) => item.clabe_prefix === clabeBankPrefix))
    throw new ConfigError(
      "EMISOR_CLABE_BANK_PREFIX must be the CLABE bank code of a SPEI participant (646 is STP)",
    );
  const database = databaseUrl(env);
  const master = masterKey(env);
  const sandbox = sandboxMode(env);
  const host = listenHost(env);
  const port = integer(env, "PORT", 3000, 0, 65535);
  return {
    host,
    port,
    adminPort: adminPort(env, port),
    adminHost: listenHost(env, "EMISOR_ADMIN_HOST", host),
    databaseUrl: database,
    databaseReadUrl: databaseReadUrl(env, database),
    dataDir: dataDirectory(env, database === undefined || (sandbox && master === undefined)),
    masterKey: master,
    tokenTtlSeconds: integer(env, "EMISOR_TOKEN_TTL_SECONDS", 3600, 1, 7 * 24 * 3600),
    sandbox,
    logLevel: logLevel(env),
    dbPoolSize: integer(env, "EMISOR_DB_POOL_SIZE", 20, 1, 500),
    dbQueryTimeoutMs: integer(env, "EMISOR_DB_QUERY_TIMEOUT_MS", limits.dbQueryTimeoutMs, 100, 600_000),
    dbPreparedStatements: integer(
      env,
      "EMISOR_DB_PREPARED_STATEMENTS",
      limits.dbPreparedStatementsMax,
      0,
      10_000,
    ),
    authCacheSeconds: integer(env, "EMISOR_AUTH_CACHE_SECONDS", 5, 0, 300),
    apiKeyPasswordMinLength: integer(env, "EMISOR_API_KEY_PASSWORD_MIN_LENGTH", 12, 1, 30),
    rateLimitPerSecond: integer(env, "EMISOR_RATE_LIMIT_PER_SECOND", 0, 0, 1_000_000),
    clabeBankPrefix,
    speiWebhookSecret: signingSecret(env, "EMISOR_SPEI_WEBHOOK_SECRET"),
    cardNetworkSecret: signingSecret(env, "EMISOR_CARD_NETWORK_SECRET"),
    holdDays: integer(env, "EMISOR_HOLD_DAYS", 7, 1, 60),
    lodgingHoldDays: integer(env, "EMISOR_HOLD_DAYS_LODGING", 30, 1, 90),
    workers: boolean(env, "EMISOR_WORKERS", true),
    trustProxy: trustedProxies(env, "EMISOR_TRUST_PROXY"),
    speiSimSettleMs: integer(env, "EMISOR_SIM_SPEI_SETTLE_MS", 3000, 0, 24 * 3600 * 1000),
    speiSimReturnProbability: probability(env, "EMISOR_SIM_SPEI_RETURN_PROBABILITY"),
    speiSimUnavailableProbability: probability(env, "EMISOR_SIM_SPEI_UNAVAILABLE_PROBABILITY"),
    speiSimJournal: speiSimJournal(env),
    airtimeSimDelayMs: airtimeSimDelay(env),
    airtimeSimFailureProbability: probability(env, "EMISOR_SIM_AIRTIME_FAILURE_PROBABILITY"),
  };
}
