import type { FastifyInstance } from "fastify";
import { AppError, errors } from "../errors.ts";

/**
 * Per-API-key rate limit on routes marked `config: { rateLimited: true }` (money-moving ones):
 * a token bucket of `perSecond` tokens refilled continuously, with a burst of the same size.
 * Per process: with N processes behind a balancer the effective limit is N times this.
 * 0 disables it.
 */
export function registerRateLimit(app: FastifyInstance, perSecond: number): void {
  if (perSecond <= 0) return;
  const buckets = new Map<string, { tokens: number; at: number }>();
  app.addHook("onRequest", async (request) => {
    if (!request.routeOptions.config.rateLimited || !request.caller) return;
    const now = Date.now();
    const key = request.caller.apiKeyId;
    const bucket = buckets.get(key) ?? { tokens: perSecond, at: now };
    bucket.tokens = Math.min(perSecond, bucket.tokens + ((now - bucket.at) / 1000) * perSecond);
    bucket.at = now;
    if (buckets.size >= 100_000 && !buckets.has(key)) buckets.clear();
    buckets.set(key, bucket);
    if (bucket.tokens < 1) {
      const retryAfter = Math.max(1, Math.ceil((1 - bucket.tokens) / perSecond));
      throw new AppError(errors.rateLimited, { headers: { "retry-after": String(retryAfter) } });
    }
    bucket.tokens -= 1;
  });
}
