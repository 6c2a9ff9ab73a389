import type { Db, Queryable } from "../../db/database.ts";
import { limits } from "../../limits.ts";
import { type EffectiveEndpoint, effectiveEndpoints } from "../decisions/service.ts";
import { BoundedMap } from "../shared/bounded-map.ts";

/**
 * Each client's decision endpoint (its own or inherited), as a process last read it: every batch
 * of authorizations needs its clients' endpoints, and they change rarely. An entry is read again
 * after `authorizationEndpointMemoryMs`, so a change reaches every process within that bound.
 */
export class EndpointCache {
  readonly #db: Db;
  readonly #vaultKey: Buffer;
  readonly #entries = new BoundedMap<string, { at: number; endpoint: EffectiveEndpoint | null }>(
    limits.authorizationEndpointMemoryClients,
  );

  constructor(db: Db, vaultKey: Buffer) {
    this.#db = db;
    this.#vaultKey = vaultKey;
  }

  /**
   * `through` is the transaction a caller holds, if any: a read on another connection while it
   * holds one would wait for a second connection (the embedded engine has one).
   */
  async forClients(
    clientIds: Iterable<string>,
    through: Queryable = this.#db,
  ): Promise<Map<string, EffectiveEndpoint>> {
    const now = Date.now();
    const ids = [...new Set(clientIds)];
    const stale = ids.filter((id) => {
      const entry = this.#entries.get(id);
      return !entry || now - entry.at >= limits.authorizationEndpointMemoryMs;
    });
    if (stale.length > 0) {
      const found = await effectiveEndpoints(through, this.#vaultKey, stale);
      for (const id of stale) this.#entries.set(id, { at: now, endpoint: found.get(id) ?? null });
    }
    const endpoints = new Map<string, EffectiveEndpoint>();
    for (const id of ids) {
      const endpoint = this.#entries.get(id)?.endpoint;
      if (endpoint) endpoints.set(id, endpoint);
    }
    return endpoints;
  }
}
