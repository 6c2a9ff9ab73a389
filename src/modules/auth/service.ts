import { isIP } from "node:net";
import { decoyHash, verifySecret } from "../../crypto/secrets.ts";
import type { Db } from "../../db/database.ts";
import { runAsTenant } from "../../db/tenant-scope.ts";
import { AppError, errors } from "../../errors.ts";
import type { Caller } from "../../http/caller.ts";
import { limits } from "../../limits.ts";
import { BoundedMap } from "../shared/bounded-map.ts";
import * as repo from "./repository.ts";
import { signToken, type TokenClaims, verifyToken } from "./tokens.ts";

export interface LoginResult {
  token: string;
  expiresIn: number;
  apiKeyId: string;
  clientId: string;
}

/**
 * Login, logout and token authentication. A disabled API key or client, and a revoked token,
 * stop working within `authCacheSeconds` in every process (at once in the process that made
 * the change), because each process caches a key's state for at most that long.
 */
export class AuthService {
  readonly #db: Db;
  readonly #tokenKey: Buffer;
  readonly #tokenTtlSeconds: number;
  readonly #cacheMs: number;
  readonly #cache = new Map<string, { state: repo.KeyState; loadedAt: number }>();
  readonly #loading = new Map<string, Promise<repo.KeyState | undefined>>();
  /**
   * Tokens whose signature this process has checked, with their claims. A token is the same
   * string every time its client sends it and its signature cannot change without changing the
   * string, so checking it once is enough; its expiry, its key's state and revocation are still
   * checked on every request. Verifying on every request costs more than the rest of a cached
   * route (bench/NOTES.md has the measurement).
   */
  readonly #verified = new BoundedMap<string, TokenClaims>(limits.verifiedTokensMax);

  constructor(options: { db: Db; tokenKey: Buffer; tokenTtlSeconds: number; authCacheSeconds: number }) {
    this.#db = options.db;
    this.#tokenKey = options.tokenKey;
    this.#tokenTtlSeconds = options.tokenTtlSeconds;
    this.#cacheMs = options.authCacheSeconds * 1000;
  }

  /**
   * Attempts sent at once get no more guesses than attempts sent one after another. Each check
   * waits its turn for scrypt, and the limits are checked again when the turn comes, so an
   * attempt behind enough failures is refused without a check. Once checked, a wrong password is
   * counted against its address and its key id, and answers the limit (2007, 2008) instead of 2005
   * when failures checked beside it reached the limit first; a right password answers 2007 or
   * 2008 too then, and clears its key's count otherwise. The counts are in the database, shared
   * by every process on it. A key id that no key has takes the same path, with the same
   * statements, as a real key with a wrong password: the same answers, the same lock after the
   * same failures, and one scrypt check in the same time.
   */
  async login(apiKey: string, password: string, address: string): Promise<LoginResult> {
    const attempt = { apiKey, address: addressBucket(address) };
    const found = await repo.findKeyForLogin(this.#db, attempt, loginRules);
    throwIfLimited(found.limits);
    const right = await verifySecret(password, found.key?.passwordHash ?? decoyHash, async () => {
      throwIfLimited(await repo.loginLimits(this.#db, attempt, loginRules));
    });
    const key = found.key;
    if (!right || !key) {
      const counted = await repo.recordFailedLogin(this.#db, attempt, loginRules);
      await repo.purgeLoginFailures(this.#db, limits.loginFailuresPurgeBatch);
      throwIfLimited(counted);
      throw new AppError(errors.invalidCredentials);
    }
    throwIfLimited(await repo.recordLoginSuccess(this.#db, attempt, loginRules));
    if (key.keyStatus !== "ACTIVE" || key.clientStatus !== "ACTIVE")
      throw new AppError(errors.apiKeyDisabled);
    const now = Math.floor(Date.now() / 1000);
    const { token } = signToken(this.#tokenKey, {
      kid: key.apiKeyId,
      cid: key.clientId,
      iat: now,
      exp: now + this.#tokenTtlSeconds,
    });
    return { token, expiresIn: this.#tokenTtlSeconds, apiKeyId: key.apiKeyId, clientId: key.clientId };
  }

  async logout(caller: Caller): Promise<void> {
    await repo.revokeToken(this.#db, caller.tokenId, caller.apiKeyId, new Date(caller.tokenExpiresAt * 1000));
    this.#cache.get(caller.apiKeyId)?.state.revokedTokenIds.add(caller.tokenId);
  }

  /**
   * Resolves `Authorization: Bearer <token>` to the caller, or throws a 401 of the catalog. The
   * answer comes at once when this process knows the key's state (almost every request), and as a
   * promise when the state must be read first: a request that needs no query pays for no promise.
   */
  authenticate(header: string | undefined): Caller | Promise<Caller> {
    if (!header) throw new AppError(errors.tokenMissing);
    const match = /^Bearer +(\S+)\s*$/i.exec(header);
    if (!match?.[1])
      throw new AppError(errors.tokenInvalid, { message: "Authorization must be Bearer <token>" });
    const token = match[1];
    const now = Math.floor(Date.now() / 1000);
    let claims = this.#verified.get(token);
    if (!claims) {
      claims = verifyToken(this.#tokenKey, token, now);
      this.#verified.set(token, claims);
    } else if (claims.exp <= now) {
      this.#verified.delete(token);
      throw new AppError(errors.tokenExpired);
    }
    const cached = this.#cache.get(claims.kid);
    if (cached && Date.now() - cached.loadedAt < this.#cacheMs) return callerOf(claims, cached.state);
    const verified = claims;
    return this.#loadKeyState(claims.kid).then((state) => callerOf(verified, state));
  }

  /** Forget what this process knows about a key (after disabling it here). */
  invalidate(apiKeyId: string): void {
    this.#cache.delete(apiKeyId);
    this.#loading.delete(apiKeyId);
  }

  /** Forget what this process knows about every key (after a client's status changed here). */
  invalidateAll(): void {
    this.#cache.clear();
    this.#loading.clear();
  }

  /**
   * One lookup per key at a time, shared by the requests that need it meanwhile, and counted as
   * that key's turn at the database (a burst of one key's requests queues behind its own lookup,
   * not in front of other tenants'). A load that an invalidation overtook is not cached.
   */
  #loadKeyState(apiKeyId: string): Promise<repo.KeyState | undefined> {
    const inFlight = this.#loading.get(apiKeyId);
    if (inFlight) return inFlight;
    const loading = runAsTenant(`api-key:${apiKeyId}`, () => repo.loadKeyState(this.#db, apiKeyId)).then(
      (state) => {
        if (state && this.#loading.get(apiKeyId) === loading) {
          if (this.#cache.size >= 100_000) this.#cache.clear();
          this.#cache.set(apiKeyId, { state, loadedAt: Date.now() });
        }
        return state;
      },
    );
    const forget = () => {
      if (this.#loading.get(apiKeyId) === loading) this.#loading.delete(apiKeyId);
    };
    loading.then(forget, forget);
    this.#loading.set(apiKeyId, loading);
    return loading;
  }
}

const loginRules: repo.LoginRules = {
  addressFailuresMax: limits.loginFailuresPerIpMax,
  addressWindowSeconds: limits.loginFailureWindowSeconds,
  keyFailuresMax: limits.loginFailuresPerKeyMax,
  keyLockSeconds: limits.loginLockSeconds,
};

/** 2007 while the address used up its failures, else 2008 while the key id is locked; Retry-After. */
function throwIfLimited(limited: repo.LoginLimits): void {
  if (limited.addressRetryAfter !== null)
    throw new AppError(errors.loginRateLimited, {
      headers: { "retry-after": String(limited.addressRetryAfter) },
    });
  if (limited.keyRetryAfter !== null)
    throw new AppError(errors.apiKeyLocked, { headers: { "retry-after": String(limited.keyRetryAfter) } });
}

/** The caller a verified token names, once its key's state is known; or a 401 of the catalog. */
function callerOf(claims: TokenClaims, state: repo.KeyState | undefined): Caller {
  if (!state || state.clientId !== claims.cid) throw new AppError(errors.tokenInvalid);
  if (!state.active) throw new AppError(errors.apiKeyDisabled);
  if (state.revokedTokenIds.has(claims.jti)) throw new AppError(errors.tokenRevoked);
  return {
    clientId: state.clientId,
    apiKeyId: state.apiKeyId,
    rootId: state.rootId,
    lineage: state.lineage,
    tokenId: claims.jti,
    tokenExpiresAt: claims.exp,
  };
}

/**
 * What the per-address limit counts: an IPv4 address (an IPv4-mapped IPv6 one as IPv4), or an
 * IPv6 address's /64. A single IPv6 host is routinely given a whole /64, so counting each /128
 * would let it rotate addresses and never reach the limit.
 */
export function addressBucket(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped?.[1]) return mapped[1];
  if (isIP(address) !== 6) return address;
  const [head = "", tail] = address.toLowerCase().split("%")[0]?.split("::") ?? [];
  const groupsOf = (text: string | undefined) => (text ? text.split(":") : []);
  const left = groupsOf(head);
  const right = groupsOf(tail);
  // An embedded IPv4 tail (::1.2.3.4) is two groups; only the first four groups matter here.
  const width = (groups: string[]) => groups.reduce((n, g) => n + (g.includes(".") ? 2 : 1), 0);
  const groups =
    tail === undefined ? left : [...left, ...Array(8 - width(left) - width(right)).fill("0"), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => (g.includes(".") ? "0" : Number.parseInt(g || "0", 16).toString(16)))
    .join(":")}::/64`;
}
