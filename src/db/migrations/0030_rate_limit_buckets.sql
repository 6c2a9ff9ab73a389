-- The per-API-key rate limit's token buckets, shared by every process on this database: each
-- process leases a few tokens at a time from its key's row (http/rate-limit.ts) and spends them
-- in memory, so a request touches this table only when its process's lease has run out.
--
-- `tokens` is what the bucket held at `refilled_at` (it refills at the configured rate up to its
-- burst); `granted` is what the last lease took, read back by the statement that took it. One row
-- per API key that has called a rate-limited route: never more rows than keys.
create table rate_limit_buckets (
  subject text primary key,
  tokens double precision not null check (tokens >= 0),
  granted integer not null check (granted >= 0),
  refilled_at timestamptz not null
);
