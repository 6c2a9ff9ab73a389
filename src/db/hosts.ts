import pg from "pg";

/**
 * Several hosts in one PostgreSQL URL, as libpq reads them
 * (`postgres://u@h1:5432,h2:5433/db?target_session_attrs=read-write`). node-postgres takes one
 * host only, so Emisor picks the host itself: the first, in the order written, that answers and
 * (with `read-write`) is not a standby. The pick is kept until a connection to it fails or finds
 * it read-only; then the hosts are tried again, so a process follows a promoted standby after a
 * failover with no restart and no change of configuration.
 */
export interface HostPort {
  host: string;
  port: number;
}

export interface ParsedDatabaseUrl {
  hosts: HostPort[];
  /** `target_session_attrs=read-write` (or `primary`): a standby is never used. */
  readWrite: boolean;
  /** The URL with one host in place of the list and without target_session_attrs, for pg. */
  urlFor(host: HostPort): string;
}

const defaultPort = 5432;
const sessionAttrs: Record<string, boolean> = { any: false, "read-write": true, primary: true };

export class DatabaseUrlError extends Error {}

/**
 * Splits the host list out of a PostgreSQL URL. A URL with one host (or none: a socket directory
 * in `?host=`) and no target_session_attrs is answered `undefined`: pg reads it as it always did.
 * Errors never quote the URL, which may hold a password.
 */
export function parseDatabaseUrl(url: string): ParsedDatabaseUrl | undefined {
  const parts = /^([A-Za-z][A-Za-z0-9+.-]*:\/\/)([^/?#]*)(.*)$/s.exec(url);
  if (!parts) return undefined;
  const [, scheme = "", authority = "", rest = ""] = parts;
  const at = authority.lastIndexOf("@");
  const userInfo = at < 0 ? "" : authority.slice(0, at + 1);
  const hostList = authority.slice(at + 1);
  const { query, attrs } = takeSessionAttrs(rest);
  if (!hostList.includes(",") && attrs === undefined) return undefined;
  if (attrs !== undefined && !(attrs in sessionAttrs))
    throw new DatabaseUrlError(
      `target_session_attrs must be read-write, primary or any (Emisor connects only to those); got "${attrs}"`,
    );
  const hosts = hostList.split(",").map(hostPort);
  return {
    hosts,
    readWrite: sessionAttrs[attrs ?? "any"] ?? false,
    urlFor: ({ host, port }) =>
      `${scheme}${userInfo}${host.includes(":") ? `[${host}]` : host}:${port}${query}`,
  };
}

/** The path and query without target_session_attrs, and its value. */
function takeSessionAttrs(rest: string): { query: string; attrs: string | undefined } {
  const q = rest.indexOf("?");
  if (q < 0) return { query: rest, attrs: undefined };
  let attrs: string | undefined;
  const kept = rest
    .slice(q + 1)
    .split("&")
    .filter((pair) => {
      const [name, value = ""] = pair.split("=");
      if (name !== "target_session_attrs") return true;
      attrs = decodeURIComponent(value).toLowerCase();
      return false;
    });
  return { query: rest.slice(0, q) + (kept.length > 0 ? `?${kept.join("&")}` : ""), attrs };
}

function hostPort(text: string): HostPort {
  const found = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::([0-9]{1,5}))?$/.exec(text);
  const host = found?.[1] ?? found?.[2];
  const port = found?.[3] === undefined ? defaultPort : Number(found[3]);
  if (!host || port < 1 || port > 65535)
    throw new DatabaseUrlError(
      "each host of a multi-host DATABASE_URL must be host or host:port with a port from 1 to 65535 (h1:5432,h2:5432)",
    );
  return { host, port };
}

const label = ({ host, port }: HostPort) => `${host}:${port}`;

/**
 * The host new connections go to, shared by a pool's connections. `target()` answers the host
 * last found good, or tries every host in order (one attempt at a time, whoever asks) and keeps
 * the first that qualifies.
 */
export class HostSet {
  readonly parsed: ParsedDatabaseUrl;
  readonly #probeTimeoutMs: number;
  #known: HostPort | undefined;
  #probing: Promise<HostPort> | undefined;

  constructor(parsed: ParsedDatabaseUrl, probeTimeoutMs: number) {
    this.parsed = parsed;
    this.#probeTimeoutMs = probeTimeoutMs;
  }

  /** The host last found good, if any (for logs and tests). */
  get current(): HostPort | undefined {
    return this.#known;
  }

  async target(): Promise<HostPort> {
    if (this.#known) return this.#known;
    this.#probing ??= this.#probe().finally(() => {
      this.#probing = undefined;
    });
    return this.#probing;
  }

  /** A connection to `host` failed or found it read-only: the next one looks again. */
  forget(host: HostPort): void {
    if (this.#known === host) this.#known = undefined;
  }

  async #probe(): Promise<HostPort> {
    const failures: string[] = [];
    let transient = true;
    for (const host of this.parsed.hosts) {
      const failure = await this.#qualifies(host);
      if (failure === undefined) {
        this.#known = host;
        return host;
      }
      failures.push(`${label(host)}: ${failure.why}`);
      transient &&= failure.transient;
    }
    const error = unreachable(
      `no host of DATABASE_URL is up${this.parsed.readWrite ? " and read-write" : ""} (${failures.join("; ")})`,
    );
    throw Object.assign(error, { transient });
  }

  /** undefined when `host` answers (and is a primary, if asked); otherwise why not. */
  async #qualifies(host: HostPort): Promise<{ why: string; transient: boolean } | undefined> {
    const client = new pg.Client({
      connectionString: this.parsed.urlFor(host),
      connectionTimeoutMillis: this.#probeTimeoutMs,
      query_timeout: this.#probeTimeoutMs,
    });
    client.on("error", () => {});
    try {
      await client.connect();
      if (!this.parsed.readWrite) return undefined;
      const { rows } = await client.query<{ standby: boolean }>("select pg_is_in_recovery() as standby");
      return rows[0]?.standby ? { why: readOnly, transient: true } : undefined;
    } catch (error) {
      const { code, message } = error as { code?: string; message?: string };
      // A server's refusal is a SQLSTATE and a sentence; a socket's, a code that says it all.
      const why = code && /^[0-9A-Z]{5}$/.test(code) ? `${code} ${message}` : (code ?? String(message));
      return { why, transient: mayComeUp(error) };
    } finally {
      await client.end().catch(() => {});
    }
  }
}

/**
 * The client class a pool makes its connections with: each one connects to the host the set
 * picks, and checks that it is still a primary (a host found good may have been replaced by a
 * standby of the same address). A failure makes the set look again at the next connection; a
 * Client connects only once, so the pool's caller retries with a new one (database.ts).
 */
export function failoverClient(hosts: HostSet): typeof pg.Client {
  return class FailoverClient extends pg.Client {
    // pg-pool calls connect(callback); a direct caller awaits the promise form.
    override connect(): Promise<pg.Client>;
    override connect(callback: (error: Error | null) => void): void;
    override connect(callback?: (error: Error | null) => void): Promise<pg.Client> | undefined {
      const opened = this.#open().then(() => this as pg.Client);
      if (!callback) return opened;
      opened.then(() => callback(null), callback);
      return undefined;
    }

    async #open(): Promise<void> {
      const target = await hosts.target();
      this.host = target.host;
      this.port = target.port;
      try {
        await super.connect();
      } catch (error) {
        hosts.forget(target);
        throw error;
      }
      if (!hosts.parsed.readWrite) return;
      const { rows } = await this.#inRecovery(target);
      if (rows[0]?.standby) {
        hosts.forget(target);
        await this.end().catch(() => {});
        throw Object.assign(unreachable(`${label(target)} of DATABASE_URL is ${readOnly}`), {
          transient: true,
        });
      }
    }

    /**
     * The check runs before the pool listens for this client's errors: a connection lost meanwhile
     * (the host failing over) would emit an 'error' nobody hears, which ends the process. The
     * query's own rejection reports it.
     */
    async #inRecovery(target: HostPort): Promise<{ rows: { standby: boolean }[] }> {
      const unheard = () => {};
      this.on("error", unheard);
      try {
        return await this.query<{ standby: boolean }>("select pg_is_in_recovery() as standby");
      } catch (error) {
        hosts.forget(target);
        throw error;
      } finally {
        this.off("error", unheard);
      }
    }
  } as unknown as typeof pg.Client;
}

const readOnly = "read-only (a standby)";
/**
 * Failures of a host that may answer soon, by code or (pg's timeouts have none) by message:
 * refused, silent, starting up or shutting down (57P03).
 */
const transientFailures = new Set([
  "ECONNREFUSED",
  "ETIMEDOUT",
  "57P03",
  "timeout expired",
  "Query read timeout",
  "Connection terminated due to connection timeout",
]);

/**
 * True when a connection failed only because no server is up (and read-write) yet, as during a
 * failover; false for what waiting does not mend (a refused login, a missing database).
 */
export function mayComeUp(error: unknown): boolean {
  const { code, message, transient } = error as { code?: string; message?: string; transient?: boolean };
  if (transient !== undefined) return transient;
  if (transientFailures.has(code ?? "") || transientFailures.has(message ?? "")) return true;
  return error instanceof AggregateError && error.errors.length > 0 && error.errors.every(mayComeUp);
}

/** SQLSTATE 08001 (could not establish a connection): the request is answered 503, not 500. */
function unreachable(message: string): Error {
  return Object.assign(new Error(message), { code: "08001" });
}
