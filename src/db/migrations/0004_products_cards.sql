-- Products, their card stock, accounts, shipments and the card lifecycle (contract 2.4-2.6, 3,
-- 4.5-4.7; card statuses from domain-mx §1).

create sequence product_code_seq;

create table products (
  id uuid primary key,
  -- The client that created the product; it may assign it to clients in its subtree.
  owner_client_id uuid not null references clients (id),
  code text not null unique default ('P' || lpad(nextval('product_code_seq')::text, 6, '0')),
  name text not null,
  description text not null,
  card_type text not null check (card_type in ('PHYSICAL', 'VIRTUAL')),
  bin text not null check (bin ~ '^[0-9]{6,8}$'),
  affinity_group text not null,
  allow_blank_curp boolean not null default false,
  allow_blank_rfc boolean not null default false,
  -- FLAT commission charged on each SPEI transfer out from a card of this product (IVA on top).
  transfer_commission_cents bigint not null default 0 check (transfer_commission_cents >= 0),
  card_validity_months integer not null default 36 check (card_validity_months between 12 and 120),
  country_code text not null default '484',
  currency_code text not null default '484',
  status text not null default 'ACTIVE' check (status in ('ACTIVE', 'INACTIVE')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index products_owner_idx on products (owner_client_id, created_at, id);

-- A product its owner made available to a client of its subtree.
create table product_clients (
  product_id uuid not null references products (id),
  client_id uuid not null references clients (id),
  assigned_by_client_id uuid not null references clients (id),
  created_at timestamptz not null default now(),
  primary key (product_id, client_id)
);
create index product_clients_client_idx on product_clients (client_id);

create sequence account_number_seq start 1000000001;
create sequence account_reference_seq start 10000001;

-- The cardholder's account a card hangs on (contract 2.4).
create table accounts (
  id uuid primary key,
  account_number bigint not null unique default nextval('account_number_seq'),
  cardholder_id uuid not null references cardholders (id),
  client_id uuid not null references clients (id),
  product_id uuid not null references products (id),
  status text not null default 'ACTIVE' check (status in ('ACTIVE', 'CANCELED')),
  document_type text not null,
  document_number text not null,
  observations text not null default '',
  -- The API key that assigned the card (contract 2.5 assigned_by: id, alias, name, description).
  assigned_by_api_key_id uuid not null references api_keys (id),
  reference text not null default nextval('account_reference_seq')::text,
  clabe text,
  activation_date timestamptz,
  created_at timestamptz not null default now()
);
create index accounts_cardholder_idx on accounts (cardholder_id, created_at);

create table cards (
  id uuid primary key,
  product_id uuid not null references products (id),
  -- The PAN, AES-256-GCM under the vault key with the card id as associated data.
  pan_sealed text not null,
  -- HMAC-SHA256 of the PAN under the fingerprint key: lookup by number without decrypting.
  pan_fingerprint text not null unique,
  last_four text not null check (last_four ~ '^[0-9]{4}$'),
  expires_on date not null,
  status text not null default 'NOT_ASSIGNED'
    check (status in ('NOT_ASSIGNED', 'NEED_ACTIVATION', 'ACTIVE', 'TEMPORARY_INACTIVE', 'CANCELED')),
  -- Set at assignment: the owning client (the cardholder's), the cardholder and the account.
  client_id uuid references clients (id),
  cardholder_id uuid references cardholders (id),
  account_id uuid references accounts (id),
  assigned_at timestamptz,
  activated_at timestamptz,
  canceled_at timestamptz,
  status_reason text,
  pin_hash text,
  pin_failed_attempts integer not null default 0,
  pin_locked boolean not null default false,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  check ((status = 'NOT_ASSIGNED') = (client_id is null)),
  check ((status = 'CANCELED') = (canceled_at is not null))
);
-- Stock: the unassigned cards of a product, oldest first.
create index cards_stock_idx on cards (product_id, created_at) where status = 'NOT_ASSIGNED';
create index cards_account_idx on cards (account_id);
create index cards_client_idx on cards (client_id);

create table card_shipments (
  id uuid primary key,
  card_id uuid not null unique references cards (id),
  shipping_method text not null check (shipping_method in ('B2B', 'B2C', 'CUSTOM')),
  delivery_type text not null check (delivery_type in ('STANDARD', 'EXPRESS')),
  address jsonb not null,
  status text not null default 'PENDING',
  created_at timestamptz not null default now()
);

-- Every status change of a card, with who, why and where (activation, blocks, cancellation).
create table card_status_history (
  id bigint generated always as identity primary key,
  card_id uuid not null references cards (id),
  from_status text not null,
  to_status text not null,
  reason text,
  latitude double precision,
  longitude double precision,
  api_key_id uuid references api_keys (id),
  created_at timestamptz not null default now()
);
create index card_status_history_card_idx on card_status_history (card_id, id);
