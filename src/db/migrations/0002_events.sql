-- The event outbox: every event is written in the same transaction as the change it reports, so
-- an event exists exactly when its change committed. Delivery (webhooks) reads from here.
create table events (
  id uuid primary key,
  -- Commit-independent order for keyset pagination and for delivery workers to scan forward.
  seq bigint generated always as identity unique,
  type text not null,
  -- The client that owns the resource; parents may receive their sub-clients' events.
  client_id uuid not null references clients (id),
  data jsonb not null,
  created_at timestamptz not null default now()
);
create index events_client_seq_idx on events (client_id, seq);
create index events_type_seq_idx on events (type, seq);
