// Proves that the service started through npm, as a user, systemd or a container with npm as PID 1
// starts it, stops on SIGTERM or SIGINT sent to the npm process alone: within 10 s npm has exited,
// the port is free and the embedded database's lock is gone, so the next start on the directory
// succeeds. npm forwards the signal to its child, the shell running the script; a shell that ran
// node as its own child died of the signal and left node serving, holding the lock.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { bannerOf } from "./helpers/banner.ts";

const root = path.resolve(import.meta.dirname, "..");
const stopWithinMs = 10_000;

function npm(args: string[], dataDir: string, masterKey: string): ChildProcess {
  return spawn("npm", args, {
    cwd: root,
    env: {
      ...process.env,
      DATABASE_URL: "",
      EMISOR_DATA_DIR: dataDir,
      PORT: "0",
      EMISOR_MASTER_KEY: masterKey,
      LOG_LEVEL: "warn",
      // npm would otherwise ask the registry whether it is out of date.
      npm_config_update_notifier: "false",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const portIsFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });

async function eventually(what: string, check: () => boolean | Promise<boolean>, deadline: number) {
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `${what} within ${stopWithinMs / 1000} s of the signal`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Starts `npm <args>`, signals the npm process alone, and checks what the signal must release. */
async function signalledStop(args: string[], signal: NodeJS.Signals): Promise<void> {
  const dataDir = mkdtempSync(path.join(tmpdir(), "emisor-npm-"));
  const lockFile = path.join(dataDir, "emisor.lock");
  const masterKey = randomBytes(32).toString("hex");
  const child = npm(args, dataDir, masterKey);
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const banner = await bannerOf(child);
  const port = Number(/listening on http:\/\/[^:]+:(\d+)/.exec(banner)?.[1]);
  // The lock names the process that serves: the one that must stop.
  const server = Number(readFileSync(lockFile, "utf8").split(" ")[0]);
  assert.ok(port > 0 && server > 0, banner);
  try {
    const deadline = Date.now() + stopWithinMs;
    assert.ok(child.kill(signal));
    await eventually("npm exits", () => child.exitCode !== null || child.signalCode !== null, deadline);
    await eventually("the server exits", () => !isAlive(server), deadline);
    await eventually("the port is free", () => portIsFree(port), deadline);
    await eventually("the lock is released", () => !existsSync(lockFile), deadline);
    // The server shut down as it does on a signal of its own, and npm reported its success.
    assert.equal(await exited, 0);
  } finally {
    if (isAlive(server)) process.kill(server, "SIGKILL");
  }
  // The directory is free for the next start.
  const next = npm(args, dataDir, masterKey);
  await bannerOf(next);
  const nextExited = new Promise<number | null>((resolve) => next.once("exit", resolve));
  next.kill("SIGTERM");
  assert.equal(await nextExited, 0);
}

test("SIGTERM to `npm start` stops the server: port and database lock free within 10 s", async () => {
  await signalledStop(["start"], "SIGTERM");
});

test("SIGINT to `npm start` stops the server the same way", async () => {
  await signalledStop(["start"], "SIGINT");
});

test("SIGTERM to `npm run emisor -- serve` stops the server the same way", async () => {
  await signalledStop(["run", "emisor", "--", "serve"], "SIGTERM");
});

test("every npm script that runs the service replaces its shell with node", () => {
  // `npm run serve` runs the build (dist/), which the tests do not make: its script is checked for
  // the same form as the two started above.
  const { scripts } = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as {
    scripts: Record<string, string>;
  };
  for (const name of ["start", "emisor", "serve"]) {
    assert.match(scripts[name] ?? "", /^exec (env (\w+=\S+ )+)?node /, `${name}: ${scripts[name]}`);
  }
});
