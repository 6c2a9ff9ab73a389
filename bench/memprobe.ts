/**
 * Where the server's memory goes under load, round by round (heap used/total, external, RSS):
 *   npm run build && node --import tsx bench/memprobe.ts
 * SCEN=payment|lookup|authorization, ROUNDS (10 s each, 64 connections), CARDS (seeded), SNAP=1 writes V8 heap
 * snapshots after round 2 and the last (BENCH_NODE_FLAGS="--heapsnapshot-signal=SIGUSR2
 * --diagnostic-dir=DIR"). The server runs as production runs it (productionRun).
 */
import { authorizationRequests, cardPayments, load } from "./lib/load.ts";
import { Postgres } from "./lib/pg.ts";
import * as seed from "./lib/seed.ts";
import { benchCardNetworkSecret, emisorEnv, ServerProcess } from "./lib/server.ts";

const pgs = new Postgres("postgres://postgres@127.0.0.1:5432/postgres");
const database = `emisor_mem_${Date.now()}`;
await pgs.create(database);
const env = emisorEnv({ DATABASE_URL: pgs.urlOf(database) });
const server = await ServerProcess.emisor(env);
const say = async (what: string) =>
  process.stdout.write(`${what}: peak ${server.peakRssMb()} MB; ${(await server.metrics()).memory}\n`);
try {
  await say("started");
  const root = await seed.createTenantWithCli(env, server.url, "100000000.00");
  const cards = await seed.seedCards(server.url, root, Number(process.env.CARDS ?? 200), {});
  if (process.env.SCEN?.includes("authorization"))
    await seed.pool(cards, 8, (card) => seed.pay(server.url, root.token, card.id, 1_000));
  await say("seeded");
  let i = 0;
  // SCEN may list several scenarios (`authorization,payment`): each round runs the next in turn.
  const scenarios = (process.env.SCEN ?? "payment").split(",");
  for (let round = 0; round < Number(process.env.ROUNDS ?? 4); round++) {
    const which = scenarios[round % scenarios.length];
    const r = await load(
      which === "authorization"
        ? {
            url: `${server.url}/v1/rails/cards/messages`,
            method: "POST",
            connections: 64,
            warmupSeconds: 0,
            seconds: 10,
            request: authorizationRequests(
              cards.map((card) => card.id),
              benchCardNetworkSecret,
            ),
          }
        : which === "lookup"
          ? {
              url: `${server.url}/v1/cardholders`,
              connections: 64,
              warmupSeconds: 0,
              seconds: 10,
              headers: { authorization: `Bearer ${root.token}` },
              request: () => ({ path: `/v1/cardholders?id=${cards[i++ % cards.length]?.cardholderId}` }),
            }
          : {
              url: `${server.url}/v1/cards/payment`,
              method: "POST",
              connections: 64,
              warmupSeconds: 0,
              seconds: 10,
              headers: { authorization: `Bearer ${root.token}` },
              request: cardPayments(cards.map((card) => card.id)),
            },
    );
    await say(`${which} round ${round} ${r.rps}/s`);
    if (process.env.SNAP && (round === 1 || round === Number(process.env.ROUNDS ?? 4) - 1)) {
      process.kill(server.pid, "SIGUSR2");
      await new Promise((resolve) => setTimeout(resolve, 8000));
    }
  }
} finally {
  await server.stop();
  await pgs.drop(database);
}
