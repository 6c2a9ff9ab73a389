-- A client's authorization decision endpoint (as Lithic's Auth Stream Access, Stripe's
-- issuing_authorization.request): Emisor POSTs each card authorization that passed its own checks
-- there and waits timeout_ms for the client's signed answer, applying stand_in when none comes.
-- At most one per client; a client without one inherits its nearest ancestor's (read through
-- clients.lineage), so the row's key is the owner.
create table authorization_endpoints (
  client_id uuid primary key references clients (id),
  url text not null,
  timeout_ms integer not null check (timeout_ms > 0),
  stand_in text not null check (stand_in in ('APPROVE', 'DECLINE')),
  -- The signing secret ("whsec_..."), AES-256-GCM sealed under the vault key with the owner's id
  -- as associated data; shown once, when the endpoint is first registered or the secret rotated.
  secret_sealed text not null,
  -- Secrets replaced by a rotation, newest last: [{"sealed": text, "expires_at": ISO 8601}]. Each
  -- keeps signing every request, and is accepted on answers, until its own expiry.
  retired_secrets jsonb not null default '[]'::jsonb,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
