import type { FastifyInstance } from "fastify";
import { Counter, collectDefaultMetrics, Histogram, Registry } from "prom-client";

/** Prometheus metrics at /metrics: process defaults plus requests by route and status. */
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
  // Each route's series are looked up once (prom-client hashes a label set on every call
  // otherwise), and the hook takes a callback: no promise per request.
  const series = new Map<string, { count: Counter.Internal; time: Histogram.Internal<"method" | "route"> }>();
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
    done();
  });
  app.get("/metrics", { config: { auth: false }, schema: { hide: true } }, async (_request, reply) => {
    reply.header("content-type", registry.contentType);
    return registry.metrics();
  });
  return registry;
}
