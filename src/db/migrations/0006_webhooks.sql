-- Webhook endpoints and their deliveries. An event (0002) becomes one delivery row per matching
-- endpoint in the same transaction that writes the event (see modules/events/outbox.ts), so an
-- event that committed always has its deliveries and one that rolled back has none. Delivery
-- workers in any number of processes claim due rows with FOR UPDATE SKIP LOCKED.
create table webhook_endpoints (
  id uuid primary key,
  -- The owner: it receives its own events, and its subtree's when include_subclients is set.
  client_id uuid not null references clients (id),
  url text not null,
  description text,
  -- The event types wanted; null means every type, present and future.
  event_types text[],
  include_subclients boolean not null default false,
  -- The signing secret ("whsec_..."), AES-256-GCM sealed; never returned after creation.
  secret_sealed text not null,
  -- After a rotation the old secret also signs until it expires, so receivers can switch over.
  previous_secret_sealed text,
  previous_secret_expires_at timestamptz,
  status text not null default 'ENABLED' check (status in ('ENABLED', 'DISABLED')),
  disabled_reason text,
  disabled_at timestamptz,
  -- Failed attempts since the last success, and what the owner needs to see why.
  failure_streak integer not null default 0,
  last_success_at timestamptz,
  last_failure_at timestamptz,
  last_error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  check ((status = 'DISABLED') = (disabled_at is not null))
);
create index webhook_endpoints_client_idx on webhook_endpoints (client_id, created_at, id);

create table webhook_deliveries (
  id uuid primary key,
  -- The event's id is also the webhook-id header: every attempt of it carries the same one.
  event_id uuid not null references events (id),
  endpoint_id uuid not null references webhook_endpoints (id) on delete cascade,
  -- EVENT: fanned out when the event was written; TEST and REPLAY: asked for through the API.
  kind text not null check (kind in ('EVENT', 'TEST', 'REPLAY')),
  status text not null default 'PENDING' check (status in ('PENDING', 'DELIVERED', 'FAILED')),
  attempts integer not null default 0,
  -- When PENDING: when a worker may next claim it (a claim moves it forward by a lease).
  next_attempt_at timestamptz not null default now(),
  last_attempt_at timestamptz,
  last_status_code integer,
  last_error text,
  delivered_at timestamptz,
  created_at timestamptz not null default now()
);
create unique index webhook_deliveries_fanout_uq on webhook_deliveries (event_id, endpoint_id) where kind = 'EVENT';
create index webhook_deliveries_due_idx on webhook_deliveries (next_attempt_at) where status = 'PENDING';
create index webhook_deliveries_endpoint_idx on webhook_deliveries (endpoint_id, created_at);
