// The HTTP ceiling: the smallest Fastify app answering a constant JSON envelope, run as its own
// process like Emisor, so that "cardholder lookup" and friends can be compared with what Fastify
// itself does on this machine.
import Fastify from "fastify";

const app = Fastify({ logger: false });
const body = { success: true, code: 0, message: "OK", data: { hello: "world" } };
app.get("/", async () => body);
await app.listen({ host: "127.0.0.1", port: 0 });
const address = app.server.address();
process.stdout.write(
  `ceiling listening on http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}\n`,
);
process.on("SIGTERM", () => {
  void app.close().then(() => process.exit(0));
});
