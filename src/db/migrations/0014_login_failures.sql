-- Failed logins, counted in the database so that every process sharing it sees the same counts.
-- Each process counted an address's failures, and those of key ids that do not exist, in its own
-- memory: behind a load balancer an address got the limit once per process, and an unknown key
-- id locked differently from a real one (whose lock was in api_keys), which told which ids exist.
--
-- One row per address ('address', the caller's address) and per key id ('key', the api_key sent
-- at login, whether a key has it or not), neither of them a secret; passwords are never stored.
-- A row counts `failures` until `expires_at`; once they reach their limit (limits.ts) the address
-- or key is refused until `expires_at`. An address's row expires at the end of the window its
-- first failure opened; a key's, the lock's length after its last failure (at the failure that
-- locks it, that is the lock's end). Expired rows mean nothing and are deleted as failures are
-- written.
create table login_failures (
  kind text not null check (kind in ('address', 'key')),
  subject text not null,
  failures integer not null check (failures > 0),
  expires_at timestamptz not null,
  primary key (kind, subject)
);
create index login_failures_expires_idx on login_failures (expires_at);

-- A key's lock and count move here. The lock is 10 failures (loginFailuresPerKeyMax when this was
-- written) and a count is kept 30 minutes (loginLockSeconds).
insert into login_failures (kind, subject, failures, expires_at)
select 'key', key, 10, locked_until from api_keys where locked_until > now();
insert into login_failures (kind, subject, failures, expires_at)
select 'key', key, failed_logins, now() + interval '30 minutes' from api_keys
where failed_logins > 0 and (locked_until is null or locked_until <= now());

-- api_keys.failed_logins and locked_until stay, unread by this release: during a rolling upgrade
-- the processes still running the previous release count in them (their counts are their own
-- until they stop). A later release drops them.
