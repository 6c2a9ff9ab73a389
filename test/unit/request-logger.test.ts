import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { describe, it } from "node:test";
import type { FastifyBaseLogger } from "fastify";
import { pino } from "pino";
import { maskCardNumbers } from "../../src/domain/luhn.ts";
import { loggerOptions, requestLoggerFactory } from "../../src/http/logger.ts";

/** A pino logger at `level` as the service configures it, and the lines it wrote. */
function capture(level: string): { root: FastifyBaseLogger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split("\n").filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { root: pino(loggerOptions(level) as object, sink), lines };
}

const child = (root: FastifyBaseLogger, options = {}) =>
  requestLoggerFactory.call(undefined as never, root, { reqId: "req-1" }, options, undefined as never);

describe("request loggers, made when a request first writes a line", () => {
  it("a line at an enabled level carries the request id, redacted as the root logger redacts", () => {
    const { root, lines } = capture("warn");
    const log = child(root);
    log.warn({ card: { pan: "5311223344556677" }, note: "x" }, "database unavailable");
    log.error("unhandled error");
    assert.equal(lines.length, 2);
    assert.equal(lines[0]?.reqId, "req-1");
    assert.equal(lines[0]?.msg, "database unavailable");
    assert.deepEqual(lines[0]?.card, { pan: "[redacted]" });
    assert.equal(lines[1]?.reqId, "req-1");
    assert.equal(log.level, "warn");
  });

  it("lines below the level write nothing; debug writes them once the root is at debug", () => {
    const quiet = capture("warn");
    const log = child(quiet.root);
    log.info("incoming request");
    log.debug("detail");
    log.trace("more");
    assert.equal(quiet.lines.length, 0);
    const loud = capture("debug");
    const debugLog = child(loud.root);
    debugLog.info("incoming request");
    debugLog.debug("detail");
    debugLog.trace("more");
    assert.deepEqual(
      loud.lines.map((line) => [line.reqId, line.msg]),
      [
        ["req-1", "incoming request"],
        ["req-1", "detail"],
      ],
    );
  });

  it("its own children keep the request id; a route's own level makes a real child at once", () => {
    const { root, lines } = capture("info");
    child(root).child({ part: "rails" }).info("sent");
    assert.deepEqual([lines[0]?.reqId, lines[0]?.part], ["req-1", "rails"]);
    const routeLevel = child(root, { level: "error" });
    routeLevel.warn("dropped");
    routeLevel.error("kept");
    assert.deepEqual(
      lines.slice(1).map((line) => line.msg),
      ["kept"],
    );
  });
});

describe("what a log line may not carry", () => {
  it("a pool error's connection is redacted", () => {
    const { root, lines } = capture("warn");
    const err = Object.assign(new Error("Connection terminated"), {
      client: { processID: 7, secretKey: 99 },
    });
    root.warn({ err }, "database connection failed");
    assert.equal((lines[0]?.err as Record<string, unknown> | undefined)?.client, "[redacted]");
  });

  it("card numbers are masked to their last four; other digit runs stay", () => {
    assert.equal(
      maskCardNumbers("/v1/cards/4111111111111111/movements"),
      "/v1/cards/************1111/movements",
    );
    // A CLABE (18 digits, not Luhn-valid here) and a UUID's 12-digit group are not card numbers.
    assert.equal(
      maskCardNumbers("/v1/transfer/clabe/collection/646180000000000012/operations"),
      "/v1/transfer/clabe/collection/646180000000000012/operations",
    );
    assert.equal(
      maskCardNumbers("a1700000-0000-4000-8000-000000000100"),
      "a1700000-0000-4000-8000-000000000100",
    );
  });
});
