-- Cardholders (contract 2.3, 4.2). rfc, curp, email and mobile_phone are unique across all
-- cardholders (contract 4.2), enforced here so that concurrent registrations cannot race.
-- rfc and curp may be null when a product of the client allows a blank one.
create table cardholders (
  id uuid primary key,
  client_id uuid not null references clients (id),
  first_name text not null,
  second_name text,
  third_name text,
  surname text not null,
  second_surname text,
  work_area text,
  rfc text,
  curp text,
  email text not null,
  primary_phone text not null,
  mobile_phone text not null,
  street text not null,
  ext_street_number text not null,
  int_street_number text,
  suburb text not null,
  township text not null,
  city text not null,
  state text not null,
  postal_code text not null,
  country text not null default '484',
  birthdate date not null,
  gender text not null,
  marital_status text not null,
  has_kids boolean not null,
  gross_monthly_income_cents bigint check (gross_monthly_income_cents >= 0),
  net_monthly_income_cents bigint check (net_monthly_income_cents >= 0),
  observations text,
  external_id text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create unique index cardholders_rfc_uq on cardholders (rfc);
create unique index cardholders_curp_uq on cardholders (curp);
create unique index cardholders_email_uq on cardholders (lower(email));
create unique index cardholders_mobile_phone_uq on cardholders (mobile_phone);
create index cardholders_client_idx on cardholders (client_id, created_at, id);
create index cardholders_primary_phone_idx on cardholders (primary_phone);
