import type { FastifyInstance } from "fastify";
import { Counter, collectDefaultMetrics, Histogram, Registry } from "prom-client";
import { errors } from "../errors.ts";

/** The 429s by which limit refused them, by their envelope code. */
const limitOfCode = new Map<number, string>([
  [errors.rateLimited.code, "requests"],
  [errors.loginRateLimited.code, "login_address"],
  [errors.apiKeyLocked.code, "login_key"],
]);

/**
 * Prometheus metrics: process defaults, requests by route and status, answers by envelope code
 * (`none` for an answer that is not an envelope) and the 429s by limit. The registry is served at
 * /metrics by `serveMetrics`, on the public app or the admin one (admin.ts).
 */
export function registerMetrics(app: FastifyInstance): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "emisor_" });
  const requests = new Counter({
    name: "emisor_http_requests_total",
    help: "HTTP requests by method, route and status",
    labelNames: ["method", "route", "status"] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: "emisor_http_request_duration_seconds",
    help: "HTTP request duration by method and route",
    labelNames: ["method", "route"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  const answers = new Counter({
    name: "emisor_http_answers_total",
    help: "Answers by envelope code (0 success, else the error catalog's; none: not an envelope)",
    labelNames: ["code"] as const,
    registers: [registry],
  });
  const limited = new Counter({
    name: "emisor_http_rate_limited_total",
    help: "Requests answered 429, by the limit that refused them: requests (per API key), login_address (failed logins of an address), login_key (a locked API key)",
    labelNames: ["limit"] as const,
    registers: [registry],
  });
  for (const limit of limitOfCode.values()) limited.inc({ limit }, 0);
  // Each route's series are looked up once (prom-client hashes a label set on every call
  // otherwise), and the hook takes a callback: no promise per request.
  const series = new Map<string, { count: Counter.Internal; time: Histogram.Internal<"method" | "route"> }>();
  const byCode = new Map<number | undefined, { answers: Counter.Internal; limited?: Counter.Internal }>();
  app.addHook("onResponse", (request, reply, done) => {
    const route = request.routeOptions.url ?? "unmatched";
    const status = String(reply.statusCode);
    const key = `${request.method} ${status} ${route}`;
    let found = series.get(key);
    if (found === undefined) {
      found = {
        count: requests.labels({ method: request.method, route, status }),
        time: duration.labels({ method: request.method, route }),
      };
      series.set(key, found);
    }
    found.count.inc();
    found.time.observe(reply.elapsedTime / 1000);
    const code = request.envelopeCode;
    let coded = byCode.get(code);
    if (coded === undefined) {
      const limit = code === undefined ? undefined : limitOfCode.get(code);
      coded = {
        answers: answers.labels({ code: code === undefined ? "none" : String(code) }),
        ...(limit ? { limited: limited.labels({ limit }) } : {}),
      };
      byCode.set(code, coded);
    }
    coded.answers.inc();
    coded.limited?.inc();
    done();
  });
  return registry;
}

/** GET /metrics: the registry in Prometheus' text format. */
export function serveMetrics(app: FastifyInstance, registry: Registry): void {
  app.get("/metrics", { config: { auth: false }, schema: { hide: true } }, async (_request, reply) => {
    reply.header("content-type", registry.contentType);
    return registry.metrics();
  });
}
