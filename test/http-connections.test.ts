// The shutdown's connection tracker (src/http/connections.ts) must forget a connection once it
// closes, even when the client gave up while its request was still being handled: held, the
// connection kept its request and response in memory for the life of the process.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import net from "node:net";
import { test } from "node:test";
import { trackConnections } from "../src/http/connections.ts";

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test("a client that hangs up mid-request leaves no connection tracked once its response is done", async () => {
  let answer: () => void = () => {};
  let arrived: () => void = () => {};
  const received = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  const server = createServer((_request, response) => {
    answer = () => response.end("late");
    arrived();
  });
  const tracker = trackConnections(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const port = (server.address() as net.AddressInfo).port;
    const client = net.connect(port, "127.0.0.1");
    client.on("error", () => {});
    client.write("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
    await received;
    assert.equal(tracker.connections(), 1);
    assert.equal(tracker.requestsInFlight(), 1);
    client.destroy();
    await tick(50);
    answer();
    await tick(50);
    assert.equal(tracker.requestsInFlight(), 0);
    assert.equal(tracker.connections(), 0);
  } finally {
    server.close();
  }
});

test("a finished request on a kept-alive connection leaves it tracked as idle, and closing it forgets it", async () => {
  const server = createServer((_request, response) => response.end("ok"));
  const tracker = trackConnections(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const port = (server.address() as net.AddressInfo).port;
    const client = net.connect(port, "127.0.0.1");
    const answered = new Promise<void>((resolve) => client.once("data", () => resolve()));
    client.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    await answered;
    await tick(20);
    assert.equal(tracker.connections(), 1);
    assert.equal(tracker.requestsInFlight(), 0);
    tracker.closeIdle();
    await tick(50);
    assert.equal(tracker.connections(), 0);
    client.destroy();
  } finally {
    server.close();
  }
});
