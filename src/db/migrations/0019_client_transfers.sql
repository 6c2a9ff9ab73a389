-- Money moved between the main balances of two clients of one subtree (POST /v1/clients/transfers):
-- a parent topping up a sub-client, or taking money back (from a disabled one too). The money itself
-- is the journal entry (kind CLIENT_TRANSFER, the same id); this row is what the API lists, by either
-- side, so a client can reconcile every change of its main balance that no card or SPEI explains.
create table client_transfers (
  id uuid primary key references journal_entries (id),
  from_client_id uuid not null references clients (id),
  to_client_id uuid not null references clients (id),
  -- The client whose API key asked: the two sides are it or clients below it.
  created_by_client_id uuid not null references clients (id),
  amount_cents bigint not null check (amount_cents > 0),
  description text,
  created_at timestamptz not null default now(),
  check (from_client_id <> to_client_id)
);
-- The listing reads each client's transfers newest first, once by the side that paid and once by
-- the side that received (see listClientTransfers).
create index client_transfers_from_idx on client_transfers (from_client_id, created_at desc, id desc);
create index client_transfers_to_idx on client_transfers (to_client_id, created_at desc, id desc);
