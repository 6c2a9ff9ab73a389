import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { sign } from "../../src/modules/webhooks/signature.ts";

/** What the decider does with one request: its answer, or nothing (a slow or a dead endpoint). */
export type Behaviour =
  | {
      kind: "answer";
      body: Record<string, unknown> | string;
      sign?: "right" | "none" | "wrong";
      delayMs?: number;
    }
  | { kind: "silent" }
  /** Down: the connection is closed without an answer. */
  | { kind: "drop" };

export interface DecisionCall {
  headers: IncomingHttpHeaders;
  body: { type: string; authorization: Record<string, unknown> };
}

/**
 * A client's authorization decision endpoint on 127.0.0.1, for tests and the bench: each request
 * is answered as `behave` says, signed as a client signs (Standard Webhooks, the request's
 * webhook-id, over the answer's body) with the secret given once the endpoint is registered.
 */
export class Decider {
  readonly calls: DecisionCall[] = [];
  secret = "";
  behave: (call: DecisionCall) => Behaviour = () => ({ kind: "answer", body: { decision: "APPROVE" } });
  readonly #server: Server;
  url = "";

  constructor() {
    this.#server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const call = { headers: request.headers, body: JSON.parse(Buffer.concat(chunks).toString()) };
        this.calls.push(call);
        const behaviour = this.behave(call);
        if (behaviour.kind === "silent") return;
        if (behaviour.kind === "drop") {
          request.socket.destroy();
          return;
        }
        const body = typeof behaviour.body === "string" ? behaviour.body : JSON.stringify(behaviour.body);
        const id = String(request.headers["webhook-id"]);
        const timestamp = Math.floor(Date.now() / 1000);
        const signature =
          behaviour.sign === "wrong"
            ? sign(this.secret, id, timestamp, `${body} `)
            : sign(this.secret, id, timestamp, body);
        const headers: Record<string, string> = { "content-type": "application/json" };
        if (behaviour.sign !== "none")
          Object.assign(headers, {
            "webhook-id": id,
            "webhook-timestamp": String(timestamp),
            "webhook-signature": signature,
          });
        const reply = () => response.writeHead(200, headers).end(body);
        if (behaviour.delayMs) setTimeout(reply, behaviour.delayMs).unref();
        else reply();
      });
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/decide`;
    return this;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
