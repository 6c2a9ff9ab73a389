/** Who is calling: resolved from the bearer token by the auth hook, passed to services. */
export interface Caller {
  clientId: string;
  apiKeyId: string;
  rootId: string;
  /** Ids from the root client down to and including the caller. */
  lineage: readonly string[];
  tokenId: string;
  tokenExpiresAt: number;
}
