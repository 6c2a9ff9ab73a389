-- Foundation: clients and their API keys, the double-entry ledger, idempotency keys and the
-- system key pair. Runs unchanged on PostgreSQL 15+ and on PGlite.

create sequence client_code_seq;

create table clients (
  id uuid primary key,
  parent_id uuid references clients (id),
  -- Shard key for a distributed PostgreSQL later: every tenant row belongs to one root client.
  root_id uuid not null,
  -- Ids from the root down to and including this client: "x is in my subtree" is `me = any(x.lineage)`.
  lineage uuid[] not null,
  code text not null unique default ('C' || lpad(nextval('client_code_seq')::text, 7, '0')),
  name text not null,
  alias text not null,
  email text,
  phone text,
  mobile_phone text,
  rfc text,
  street text,
  ext_street_number text,
  int_street_number text,
  suburb text,
  township text,
  city text,
  state text,
  postal_code text,
  country text not null default '484',
  contact jsonb,
  legal_representative jsonb,
  status text not null default 'ACTIVE' check (status in ('ACTIVE', 'DISABLED')),
  -- Commercial floor of the main balance when funding sub-clients (contract 8.2).
  min_balance_cents bigint not null default 0 check (min_balance_cents >= 0),
  timezone text not null default 'America/Mexico_City',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  check ((parent_id is null) = (cardinality(lineage) = 1))
);
create index clients_parent_idx on clients (parent_id, created_at, id);
create index clients_lineage_idx on clients using gin (lineage);

create table api_keys (
  id uuid primary key,
  client_id uuid not null references clients (id),
  -- The public identifier sent at login (like a user name); the password is the secret.
  key text not null unique,
  name text not null,
  alias text not null,
  description text,
  password_hash text not null,
  status text not null default 'ACTIVE' check (status in ('ACTIVE', 'DISABLED')),
  public_key_pem text,
  public_key_registered_at timestamptz,
  failed_logins integer not null default 0,
  locked_until timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index api_keys_client_idx on api_keys (client_id);

-- Tokens are signed, not stored; a logout records the token id here until it would expire anyway.
create table revoked_tokens (
  jti uuid primary key,
  api_key_id uuid not null references api_keys (id),
  expires_at timestamptz not null
);
create index revoked_tokens_key_idx on revoked_tokens (api_key_id, expires_at);

create table ledger_accounts (
  id uuid primary key,
  kind text not null check (kind in ('CLIENT_MAIN', 'CARD', 'SYSTEM')),
  -- System accounts are found by code (SANDBOX_FUNDING, SPEI_IN, ...).
  code text unique,
  client_id uuid references clients (id),
  balance_cents bigint not null default 0,
  allow_negative boolean not null default false,
  created_at timestamptz not null default now(),
  constraint ledger_accounts_non_negative check (allow_negative or balance_cents >= 0),
  check ((kind = 'SYSTEM') = (code is not null)),
  check (kind = 'SYSTEM' or client_id is not null)
);
create unique index ledger_accounts_client_main_uq on ledger_accounts (client_id) where kind = 'CLIENT_MAIN';

-- Journal entries are immutable; a correction is a new entry whose reverses_id names the original.
create table journal_entries (
  id uuid primary key,
  kind text not null,
  description text,
  client_id uuid references clients (id),
  reverses_id uuid unique references journal_entries (id),
  metadata jsonb,
  created_at timestamptz not null default now()
);

create table postings (
  id bigint generated always as identity primary key,
  entry_id uuid not null references journal_entries (id),
  account_id uuid not null references ledger_accounts (id),
  amount_cents bigint not null check (amount_cents <> 0),
  created_at timestamptz not null default now()
);
create index postings_account_idx on postings (account_id, id);
create index postings_entry_idx on postings (entry_id);

-- System accounts. Sources of money from outside may go negative; what Emisor owes may not.
insert into ledger_accounts (id, kind, code, allow_negative) values
  ('00000000-0000-4000-8000-000000000001', 'SYSTEM', 'SANDBOX_FUNDING', true),
  ('00000000-0000-4000-8000-000000000002', 'SYSTEM', 'SPEI_IN', true),
  ('00000000-0000-4000-8000-000000000003', 'SYSTEM', 'SPEI_OUT', false),
  ('00000000-0000-4000-8000-000000000004', 'SYSTEM', 'COMMISSION_REVENUE', false),
  ('00000000-0000-4000-8000-000000000005', 'SYSTEM', 'IVA_PAYABLE', false),
  ('00000000-0000-4000-8000-000000000006', 'SYSTEM', 'AIRTIME_PAYABLE', false);

-- A money-moving or creating request's first successful response, replayed for the same key.
create table idempotency_keys (
  api_key_id uuid not null references api_keys (id),
  key text not null,
  request_hash text not null,
  response_status integer not null,
  response_body jsonb not null,
  created_at timestamptz not null default now(),
  primary key (api_key_id, key)
);
create index idempotency_keys_created_idx on idempotency_keys (created_at);

create table system_keys (
  id text primary key,
  public_key_pem text not null,
  -- AES-256-GCM under a key derived from EMISOR_MASTER_KEY.
  private_key_sealed text not null,
  created_at timestamptz not null default now()
);
