// A client's authorization decision endpoint that answers at once: APPROVE, signed with the
// secret in DECIDER_SECRET, as a client would sign. Its own process, so that its work is not
// charged to the load generator's event loop.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { sign } from "../src/modules/webhooks/signature.ts";

const secret = process.env.DECIDER_SECRET ?? "";
const answer = JSON.stringify({ decision: "APPROVE" });

const server = createServer((request, response) => {
  request.resume();
  request.on("end", () => {
    const id = String(request.headers["webhook-id"]);
    const timestamp = Math.floor(Date.now() / 1000);
    response
      .writeHead(200, {
        "content-type": "application/json",
        "webhook-id": id,
        "webhook-timestamp": String(timestamp),
        "webhook-signature": sign(secret, id, timestamp, answer),
      })
      .end(answer);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`decider listening on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
