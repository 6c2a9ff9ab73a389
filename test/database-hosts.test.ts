// Proves that a multi-host DATABASE_URL is split as libpq reads it, that a single-host URL is left to
// node-postgres unchanged, and (on PostgreSQL) that Emisor connects past a host that is down.
import assert from "node:assert/strict";
import net from "node:net";
import { test } from "node:test";
import { sql } from "kysely";
import { ConfigError, loadConfig } from "../src/config.ts";
import { openDatabase } from "../src/db/database.ts";
import { DatabaseUrlError, HostSet, parseDatabaseUrl } from "../src/db/hosts.ts";
import { freePort } from "./chaos/cluster.ts";

test("a single host without target_session_attrs is pg's to read, as before", () => {
  for (const url of [
    "postgres://postgres@127.0.0.1:5432/test",
    "postgresql://u:p%40ss@db.internal/emisor?sslmode=require",
    "postgres://u@[::1]:5432/emisor",
    "postgres://u:pw@/emisor?host=/var/run/postgresql",
    "postgres:///emisor",
    "postgres://u:a,b@db/emisor",
  ])
    assert.equal(parseDatabaseUrl(url), undefined, url);
});

test("several hosts: each with its port (5432 when none), in the order written", () => {
  const parsed = parseDatabaseUrl(
    "postgres://app:s%2Fcret@h1:5433,[::1],h3:6000/emisor?sslmode=require&target_session_attrs=read-write&application_name=x",
  );
  assert.ok(parsed);
  assert.deepEqual(parsed.hosts, [
    { host: "h1", port: 5433 },
    { host: "::1", port: 5432 },
    { host: "h3", port: 6000 },
  ]);
  assert.equal(parsed.readWrite, true);
  // What pg is given: one host, the same credentials, database and options, and no
  // target_session_attrs (pg does not know it).
  assert.equal(
    parsed.urlFor({ host: "h3", port: 6000 }),
    "postgres://app:s%2Fcret@h3:6000/emisor?sslmode=require&application_name=x",
  );
  assert.equal(
    parsed.urlFor({ host: "::1", port: 5432 }),
    "postgres://app:s%2Fcret@[::1]:5432/emisor?sslmode=require&application_name=x",
  );
  const any = parseDatabaseUrl("postgres://u@a,b/db");
  assert.equal(any?.readWrite, false);
  assert.equal(any?.urlFor({ host: "b", port: 5432 }), "postgres://u@b:5432/db");
  assert.equal(parseDatabaseUrl("postgres://u@a/db?target_session_attrs=primary")?.readWrite, true);
  assert.equal(parseDatabaseUrl("postgres://u@a/db?target_session_attrs=any")?.readWrite, false);
});

test("a malformed host list or an unknown target_session_attrs is refused without echoing the URL", () => {
  for (const url of [
    "postgres://u:hunter2@h1:99999,h2/db",
    "postgres://u:hunter2@h1,,h2/db",
    "postgres://u:hunter2@h1:x,h2/db",
  ])
    assert.throws(() => parseDatabaseUrl(url), DatabaseUrlError, url);
  assert.throws(
    () => parseDatabaseUrl("postgres://u:hunter2@h1,h2/db?target_session_attrs=standby"),
    /target_session_attrs must be read-write, primary or any/,
  );
  for (const url of [
    "postgres://u:hunter2@h1:0,h2/db",
    "postgres://u:hunter2@h1,h2/db?target_session_attrs=read-only",
  ])
    assert.throws(
      () => loadConfig({ DATABASE_URL: url }),
      (error: unknown) =>
        error instanceof ConfigError &&
        /^DATABASE_URL: /.test(error.message) &&
        !/hunter2/.test(error.message),
      url,
    );
  const multi = "postgres://u:p@h1:5432,h2:5433/emisor?target_session_attrs=read-write";
  assert.equal(loadConfig({ DATABASE_URL: multi }).databaseUrl, multi);
  assert.equal(
    loadConfig({ DATABASE_URL: multi, DATABASE_READ_URL: "postgres://u@r/emisor" }).databaseReadUrl,
    "postgres://u@r/emisor",
  );
  assert.throws(
    () => loadConfig({ DATABASE_READ_URL: "postgres://u@r/emisor" }),
    /DATABASE_READ_URL needs DATABASE_URL/,
  );
});

test("the hosts are tried in order; none up is a connection failure naming each host, never the password", async () => {
  const [a, b] = [await freePort(), await freePort()];
  const set = new HostSet(
    parseDatabaseUrl(
      `postgres://u:hunter2@127.0.0.1:${a},127.0.0.1:${b}/db?target_session_attrs=read-write`,
    ) ?? assert.fail("not parsed"),
    500,
  );
  await assert.rejects(set.target(), (error: Error & { code?: string }) => {
    assert.equal(error.code, "08001");
    assert.match(
      error.message,
      new RegExp(`127\\.0\\.0\\.1:${a}: ECONNREFUSED; 127\\.0\\.0\\.1:${b}: ECONNREFUSED`),
    );
    assert.doesNotMatch(error.message, /hunter2/);
    return true;
  });
});

const server = process.env.DATABASE_URL;
test("PostgreSQL: a host that is down is passed over for the next, which is a primary", {
  skip: server ? false : "needs PostgreSQL (DATABASE_URL): the embedded engine has no hosts",
}, async () => {
  const url = new URL(server ?? "");
  const down = await freePort();
  const multi = `${url.protocol}//${url.username ? `${url.username}@` : ""}127.0.0.1:${down},${url.hostname}:${url.port || 5432}${url.pathname}?target_session_attrs=read-write`;
  const database = await openDatabase({ databaseUrl: multi, poolSize: 2 });
  try {
    const { rows } = await sql<{ port: number }>`select inet_server_port() as port`.execute(database.db);
    assert.equal(Number(rows[0]?.port), Number(url.port || 5432));
  } finally {
    await database.close();
  }
});

/** A TCP forwarder to `target` on `port`: a host of the URL that comes up later. */
function forwarder(port: number, target: { host: string; port: number }): Promise<net.Server> {
  const proxy = net.createServer((inbound) => {
    const outbound = net.connect(target.port, target.host);
    inbound.pipe(outbound).pipe(inbound);
    const close = () => {
      inbound.destroy();
      outbound.destroy();
    };
    inbound.on("error", close);
    outbound.on("error", close);
  });
  return new Promise((resolve) => proxy.listen(port, "127.0.0.1", () => resolve(proxy)));
}

test("PostgreSQL: a start with no host up yet waits for one (a failover in progress)", {
  skip: server ? false : "needs PostgreSQL (DATABASE_URL): the embedded engine has no hosts",
}, async () => {
  const url = new URL(server ?? "");
  const [down, later] = [await freePort(), await freePort()];
  const multi = `${url.protocol}//${url.username ? `${url.username}@` : ""}127.0.0.1:${down},127.0.0.1:${later}${url.pathname}?target_session_attrs=read-write`;
  const warnings: string[] = [];
  const opening = openDatabase({
    databaseUrl: multi,
    poolSize: 2,
    warn: (message) => warnings.push(message),
  });
  let proxy: net.Server | undefined;
  const started = new Promise<void>((resolve) =>
    setTimeout(async () => {
      proxy = await forwarder(later, { host: url.hostname, port: Number(url.port || 5432) });
      resolve();
    }, 1_500),
  );
  const database = await opening;
  try {
    await started;
    const { rows } = await sql<{ one: number }>`select 1 as one`.execute(database.db);
    assert.equal(Number(rows[0]?.one), 1);
    assert.equal(warnings.length, 1);
    assert.match(
      warnings[0] ?? "",
      /^waiting up to 60 s for a PostgreSQL host of DATABASE_URL: no host of DATABASE_URL is up and read-write/,
    );
  } finally {
    await database.close();
    proxy?.close();
  }
});

test("PostgreSQL: a multi-host start that reaches a server but not its database ends at once", {
  skip: server ? false : "needs PostgreSQL (DATABASE_URL): the embedded engine has no hosts",
}, async () => {
  const url = new URL(server ?? "");
  const multi = `${url.protocol}//${url.username ? `${url.username}@` : ""}127.0.0.1:${await freePort()},${url.hostname}:${url.port || 5432}/no_such_database_here?target_session_attrs=read-write`;
  const warnings: string[] = [];
  await assert.rejects(
    openDatabase({ databaseUrl: multi, poolSize: 2, warn: (message) => warnings.push(message) }),
    /could not connect to the PostgreSQL server of DATABASE_URL: .*no_such_database_here/,
  );
  assert.deepEqual(warnings, []);
});

/**
 * A server speaking just enough of PostgreSQL's protocol: it lets anyone in, answers the first
 * connection's query (the host probe's `pg_is_in_recovery()`) with false, and drops every later
 * connection at its first query, as a primary lost mid-failover does.
 */
function droppingServer(): Promise<net.Server> {
  const message = (type: string, body: Buffer) => {
    const head = Buffer.alloc(5);
    head.write(type, 0);
    head.writeInt32BE(body.length + 4, 1);
    return Buffer.concat([head, body]);
  };
  const int32 = (value: number) =>
    Buffer.from([value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255]);
  const ready = message("Z", Buffer.from("I"));
  const row = Buffer.concat([
    message(
      "T",
      Buffer.concat([
        Buffer.from([0, 1]),
        Buffer.from("standby\0"),
        int32(0),
        Buffer.from([0, 0]),
        int32(16),
        Buffer.from([0, 1]),
        int32(-1),
        Buffer.from([0, 0]),
      ]),
    ),
    message("D", Buffer.concat([Buffer.from([0, 1]), int32(1), Buffer.from("f")])),
    message("C", Buffer.from("SELECT 1\0")),
    ready,
  ]);
  let connections = 0;
  const server = net.createServer((socket) => {
    const first = connections++ === 0;
    let started = false;
    socket.on("error", () => {});
    socket.on("data", (chunk) => {
      if (!started) {
        started = true;
        socket.write(Buffer.concat([message("R", int32(0)), ready]));
      } else if (chunk[0] === 0x51 /* Q */) {
        if (first) socket.write(row);
        else socket.destroy();
      } else socket.end();
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

test("a connection lost while it checks that its host is a primary fails that connection, not the process", async () => {
  const server = await droppingServer();
  const port = (server.address() as net.AddressInfo).port;
  try {
    await assert.rejects(
      openDatabase({
        databaseUrl: `postgres://u@127.0.0.1:${port},127.0.0.1:${port}/db?target_session_attrs=read-write`,
        poolSize: 1,
      }),
      /could not connect to the PostgreSQL server of DATABASE_URL: Connection terminated unexpectedly/,
    );
  } finally {
    server.close();
  }
});
