-- SPEI and airtime: collection accounts (CLABE) and the incoming transfers they receive (contract
-- 2.8, 4.8), transfer-out orders (4.10) with the outbox that hands them to the rail, and airtime
-- products and top-ups (4.9). Runs unchanged on PostgreSQL 15+ and on PGlite.

-- The 11-digit account part of every collection CLABE: a sequence, so two CLABEs never collide
-- (the unique constraint below is the backstop).
create sequence collection_account_number_seq;

create table collection_accounts (
  id uuid primary key,
  client_id uuid not null references clients (id),
  clabe text not null unique check (clabe ~ '^[0-9]{18}$'),
  status text not null default 'ACTIVE' check (status in ('ACTIVE', 'BLOCKED', 'CANCELLED')),
  created_at timestamptz not null default now()
);
create index collection_accounts_client_idx on collection_accounts (client_id, created_at, id);

-- One incoming SPEI transfer (abono) credited to a collection account: the contract's 2.8 record.
create table transfer_operations (
  id uuid primary key,
  collection_account_id uuid not null references collection_accounts (id),
  client_id uuid not null references clients (id),
  transfer_id text not null,
  fecha_operacion date not null,
  -- Position of this transfer within its (account, day): 1, 2, 3... dense, assigned from the
  -- day counter below in the same transaction. It orders the listing and lets a page deep in the
  -- records be found through the index instead of by OFFSET.
  day_seq bigint not null check (day_seq > 0),
  institucion_ordenante text not null,
  institucion_beneficiaria text not null,
  clave_rastreo text not null,
  monto_cents bigint not null check (monto_cents > 0),
  nombre_beneficiario text not null,
  tipo_cuenta_beneficiario text not null,
  cuenta_beneficiario text not null,
  rfc_curp_beneficiario text not null,
  concepto_pago text not null,
  referencia_numerica text not null,
  nombre_ordenante text not null,
  tipo_cuenta_ordenante text not null,
  cuenta_ordenante text not null,
  rfc_curp_ordenante text not null,
  cambio_estado_detalle text not null,
  cambio_estado_causa_devolucion text not null,
  cambio_estado_estado text not null,
  email_beneficiario text not null,
  transfer_commission_cents bigint not null default 0,
  commission_charged_cents bigint not null default 0,
  iva_charged_cents bigint not null default 0,
  ts_liquidacion timestamptz not null,
  entry_id uuid not null references journal_entries (id),
  created_at timestamptz not null default now(),
  -- A redelivered abono must not credit twice. Tracking keys are unique per sending participant
  -- and operation day (domain-mx §6), so the sender is part of the key.
  constraint transfer_operations_abono_uq unique (fecha_operacion, institucion_ordenante, clave_rastreo)
);
-- Serves the listing: one account, a date range, newest first (a backward scan), and any page.
create unique index transfer_operations_page_idx
  on transfer_operations (collection_account_id, fecha_operacion, day_seq);

-- Transfers per account and operation day, maintained in the transaction that inserts each
-- transfer: the listing's total is a sum over at most the days of its range, never a count(*).
create table transfer_operation_days (
  collection_account_id uuid not null references collection_accounts (id),
  fecha_operacion date not null,
  operations bigint not null check (operations > 0),
  primary key (collection_account_id, fecha_operacion)
);

-- Transfer-out orders (4.10). The paying ledger account is a card's account (cards module).
create table spei_orders (
  id uuid primary key,
  client_id uuid not null references clients (id),
  payer_account_id uuid not null references ledger_accounts (id),
  card_id uuid,
  tracking_key text not null check (tracking_key ~ '^[0-9A-Za-z]{1,30}$'),
  operation_date date not null,
  amount_cents bigint not null check (amount_cents > 0),
  commission_cents bigint not null check (commission_cents >= 0),
  iva_cents bigint not null check (iva_cents >= 0),
  beneficiary_account text not null,
  beneficiary_account_type text not null check (beneficiary_account_type in ('PHONE', 'CARD', 'CLABE')),
  beneficiary_institution text not null,
  beneficiary_name text not null,
  beneficiary_rfc_curp text not null,
  beneficiary_email text not null,
  payment_concept text not null,
  numeric_reference text not null,
  status text not null default 'PENDIENTE'
    check (status in ('PENDIENTE', 'ENVIADA', 'LIQUIDADA', 'DEVUELTA', 'CANCELADA')),
  rail_reference text,
  state_detail text,
  return_cause text,
  entry_id uuid not null references journal_entries (id),
  reversal_entry_id uuid references journal_entries (id),
  sent_at timestamptz,
  settled_at timestamptz,
  returned_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  -- Unique per participant and operation day (domain-mx §6; a duplicate is return cause 30).
  constraint spei_orders_tracking_uq unique (operation_date, tracking_key)
);
create index spei_orders_client_idx on spei_orders (client_id, created_at, id);

-- Work for the rails, written in the same transaction as the order or top-up it names, so a crash
-- after the commit loses nothing: a dispatcher claims due rows (FOR UPDATE SKIP LOCKED), leases
-- them by moving next_attempt_at forward, calls the rail, and deletes the row when it is done.
create table rail_outbox (
  id bigint generated always as identity primary key,
  rail text not null check (rail in ('SPEI', 'AIRTIME')),
  ref_id uuid not null,
  attempts integer not null default 0,
  next_attempt_at timestamptz not null default now(),
  last_error text,
  created_at timestamptz not null default now(),
  constraint rail_outbox_ref_uq unique (rail, ref_id)
);
create index rail_outbox_due_idx on rail_outbox (rail, next_attempt_at);

-- Airtime products: global, not per tenant; a carrier and a fixed amount.
create table airtime_products (
  id uuid primary key,
  sku text not null unique,
  carrier text not null,
  name text not null,
  description text not null,
  amount_cents bigint not null check (amount_cents > 0),
  status text not null default 'ACTIVE' check (status in ('ACTIVE', 'INACTIVE')),
  created_at timestamptz not null default now()
);
insert into airtime_products (id, sku, carrier, name, description, amount_cents) values
  ('a1700000-0000-4000-8000-000000000050', 'TELCEL_50', 'TELCEL', 'Telcel $50', 'Tiempo aire Telcel 50 MXN', 5000),
  ('a1700000-0000-4000-8000-000000000100', 'TELCEL_100', 'TELCEL', 'Telcel $100', 'Tiempo aire Telcel 100 MXN', 10000),
  ('a1700000-0000-4000-8000-000000000200', 'TELCEL_200', 'TELCEL', 'Telcel $200', 'Tiempo aire Telcel 200 MXN', 20000),
  ('a1700000-0000-4000-8000-000000000500', 'TELCEL_500', 'TELCEL', 'Telcel $500', 'Tiempo aire Telcel 500 MXN', 50000),
  ('a2700000-0000-4000-8000-000000000050', 'MOVISTAR_50', 'MOVISTAR', 'Movistar $50', 'Tiempo aire Movistar 50 MXN', 5000),
  ('a2700000-0000-4000-8000-000000000100', 'MOVISTAR_100', 'MOVISTAR', 'Movistar $100', 'Tiempo aire Movistar 100 MXN', 10000),
  ('a2700000-0000-4000-8000-000000000200', 'MOVISTAR_200', 'MOVISTAR', 'Movistar $200', 'Tiempo aire Movistar 200 MXN', 20000),
  ('a3700000-0000-4000-8000-000000000050', 'ATT_50', 'ATT', 'AT&T $50', 'Tiempo aire AT&T 50 MXN', 5000),
  ('a3700000-0000-4000-8000-000000000100', 'ATT_100', 'ATT', 'AT&T $100', 'Tiempo aire AT&T 100 MXN', 10000),
  ('a3700000-0000-4000-8000-000000000200', 'ATT_200', 'ATT', 'AT&T $200', 'Tiempo aire AT&T 200 MXN', 20000),
  ('a4700000-0000-4000-8000-000000000050', 'UNEFON_50', 'UNEFON', 'Unefon $50', 'Tiempo aire Unefon 50 MXN', 5000),
  ('a4700000-0000-4000-8000-000000000100', 'UNEFON_100', 'UNEFON', 'Unefon $100', 'Tiempo aire Unefon 100 MXN', 10000),
  ('a5700000-0000-4000-8000-000000000050', 'BAIT_50', 'BAIT', 'Bait $50', 'Tiempo aire Bait 50 MXN', 5000),
  ('a5700000-0000-4000-8000-000000000100', 'BAIT_100', 'BAIT', 'Bait $100', 'Tiempo aire Bait 100 MXN', 10000);

create table airtime_topups (
  id uuid primary key,
  client_id uuid not null references clients (id),
  payer_account_id uuid not null references ledger_accounts (id),
  card_id uuid,
  product_id uuid not null references airtime_products (id),
  phone_number text not null check (phone_number ~ '^[0-9]{10}$'),
  email text not null,
  external_id text,
  additional_data text,
  amount_cents bigint not null check (amount_cents > 0),
  status text not null default 'PENDING' check (status in ('PENDING', 'COMPLETED', 'FAILED')),
  provider_reference text,
  failure_reason text,
  entry_id uuid not null references journal_entries (id),
  reversal_entry_id uuid references journal_entries (id),
  -- The Idempotency-Key of the request, so whoever finishes the top-up (the request or the
  -- worker) can update the stored response to the final one.
  api_key_id uuid references api_keys (id),
  idempotency_key text,
  completed_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index airtime_topups_client_idx on airtime_topups (client_id, created_at, id);
