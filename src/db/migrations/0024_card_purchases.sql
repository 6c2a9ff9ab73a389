-- Card purchases (the dual-message lifecycle through a card network): what the processor's
-- messages did, the authorizations and their holds, and the accounts their money moves through.
--
-- A hold moves the card's money to CARD_HOLDS (so the card's balance is what it can spend); a
-- clearing moves it on to CARD_NETWORK, what the issuer owes the network for purchases less
-- returns (it goes negative when returns outrun purchases). Both are sharded as SPEI_OUT is.
insert into ledger_accounts (id, kind, code, allow_negative) values
  ('00000000-0000-4000-8000-000000000007', 'SYSTEM', 'CARD_HOLDS', false),
  ('00000000-0000-4000-8000-000000000008', 'SYSTEM', 'CARD_NETWORK', true),
  ('00000000-0000-4000-8007-000000000001', 'SYSTEM', 'CARD_HOLDS/1', false),
  ('00000000-0000-4000-8007-000000000002', 'SYSTEM', 'CARD_HOLDS/2', false),
  ('00000000-0000-4000-8007-000000000003', 'SYSTEM', 'CARD_HOLDS/3', false),
  ('00000000-0000-4000-8007-000000000004', 'SYSTEM', 'CARD_HOLDS/4', false),
  ('00000000-0000-4000-8007-000000000005', 'SYSTEM', 'CARD_HOLDS/5', false),
  ('00000000-0000-4000-8007-000000000006', 'SYSTEM', 'CARD_HOLDS/6', false),
  ('00000000-0000-4000-8007-000000000007', 'SYSTEM', 'CARD_HOLDS/7', false),
  ('00000000-0000-4000-8007-000000000008', 'SYSTEM', 'CARD_HOLDS/8', false),
  ('00000000-0000-4000-8007-000000000009', 'SYSTEM', 'CARD_HOLDS/9', false),
  ('00000000-0000-4000-8007-00000000000a', 'SYSTEM', 'CARD_HOLDS/10', false),
  ('00000000-0000-4000-8007-00000000000b', 'SYSTEM', 'CARD_HOLDS/11', false),
  ('00000000-0000-4000-8007-00000000000c', 'SYSTEM', 'CARD_HOLDS/12', false),
  ('00000000-0000-4000-8007-00000000000d', 'SYSTEM', 'CARD_HOLDS/13', false),
  ('00000000-0000-4000-8007-00000000000e', 'SYSTEM', 'CARD_HOLDS/14', false),
  ('00000000-0000-4000-8007-00000000000f', 'SYSTEM', 'CARD_HOLDS/15', false),
  ('00000000-0000-4000-8008-000000000001', 'SYSTEM', 'CARD_NETWORK/1', true),
  ('00000000-0000-4000-8008-000000000002', 'SYSTEM', 'CARD_NETWORK/2', true),
  ('00000000-0000-4000-8008-000000000003', 'SYSTEM', 'CARD_NETWORK/3', true),
  ('00000000-0000-4000-8008-000000000004', 'SYSTEM', 'CARD_NETWORK/4', true),
  ('00000000-0000-4000-8008-000000000005', 'SYSTEM', 'CARD_NETWORK/5', true),
  ('00000000-0000-4000-8008-000000000006', 'SYSTEM', 'CARD_NETWORK/6', true),
  ('00000000-0000-4000-8008-000000000007', 'SYSTEM', 'CARD_NETWORK/7', true),
  ('00000000-0000-4000-8008-000000000008', 'SYSTEM', 'CARD_NETWORK/8', true),
  ('00000000-0000-4000-8008-000000000009', 'SYSTEM', 'CARD_NETWORK/9', true),
  ('00000000-0000-4000-8008-00000000000a', 'SYSTEM', 'CARD_NETWORK/10', true),
  ('00000000-0000-4000-8008-00000000000b', 'SYSTEM', 'CARD_NETWORK/11', true),
  ('00000000-0000-4000-8008-00000000000c', 'SYSTEM', 'CARD_NETWORK/12', true),
  ('00000000-0000-4000-8008-00000000000d', 'SYSTEM', 'CARD_NETWORK/13', true),
  ('00000000-0000-4000-8008-00000000000e', 'SYSTEM', 'CARD_NETWORK/14', true),
  ('00000000-0000-4000-8008-00000000000f', 'SYSTEM', 'CARD_NETWORK/15', true);

-- What a card owes: a clearing or an advice, which cannot be refused, for more than the card has.
-- Each card that ever owed has one CARD_OWED account, negative by what it owes, so the card's own
-- account keeps its non-negative CHECK and the books still sum to zero.
alter table ledger_accounts drop constraint ledger_accounts_kind_check;
alter table ledger_accounts add constraint ledger_accounts_kind_check
  check (kind in ('CLIENT_MAIN', 'CARD', 'SYSTEM', 'CARD_OWED'));
alter table ledger_accounts add column card_id uuid references cards (id);
alter table ledger_accounts add constraint ledger_accounts_owed_has_card
  check ((kind = 'CARD_OWED') = (card_id is not null));
create unique index ledger_accounts_card_owed_uq on ledger_accounts (card_id) where kind = 'CARD_OWED';

-- An authorization and its hold, or a force post (a clearing that named no authorization).
-- Its card and client are checked once per statement (below), not by per-row foreign keys.
create table card_authorizations (
  id uuid primary key,
  card_id uuid not null,
  -- The card's client when the first message arrived: who, with its ancestors, sees it.
  client_id uuid not null,
  status text not null check (status in ('PENDING', 'SETTLED', 'VOIDED', 'EXPIRED', 'DECLINED')),
  force_post boolean not null default false,
  -- ISO 4217 numeric; the merchant's amount in its minor units, and what moves in MXN centavos.
  currency text not null,
  merchant_amount bigint not null check (merchant_amount >= 0),
  requested_cents bigint not null check (requested_cents >= 0),
  authorized_cents bigint not null default 0 check (authorized_cents >= 0),
  held_cents bigint not null default 0 check (held_cents >= 0),
  cleared_cents bigint not null default 0 check (cleared_cents >= 0),
  authorization_code text,
  decline_reason text,
  channel text not null,
  partial_allowed boolean not null default false,
  merchant jsonb not null,
  mcc text not null,
  -- The CARD_HOLDS shard the hold sits on: every later change of the hold moves that shard.
  hold_account_id uuid,
  -- When a hold not cleared by then is released (the expiry worker).
  expires_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  check ((status = 'DECLINED') = (decline_reason is not null)),
  check (status = 'PENDING' or held_cents = 0)
);
create index card_authorizations_card_idx on card_authorizations (card_id, created_at desc, id desc);
create index card_authorizations_pending_idx on card_authorizations (card_id) where status = 'PENDING';
create index card_authorizations_expiry_idx on card_authorizations (expires_at) where status = 'PENDING';

-- Every message of the processor (and each expiry): its id answers a repeat with the first answer.
create table card_network_messages (
  message_id text primary key,
  -- The order messages were processed in (an authorization's history); never looked up alone.
  seq bigint generated always as identity,
  type text not null,
  card_id uuid,
  client_id uuid,
  authorization_id uuid,
  -- The MXN centavos the message moved (a clearing, a return) or asked for (an authorization).
  amount_cents bigint,
  entry_id uuid,
  -- A return reversal names the return it undoes; a return is undone once.
  reverses_message_id text unique references card_network_messages (message_id),
  file_id text,
  merchant jsonb,
  response jsonb,
  created_at timestamptz not null default now()
);
create index card_network_messages_authorization_idx on card_network_messages (authorization_id, seq);
create index card_network_messages_posted_idx on card_network_messages (created_at)
  where type in ('CLEARING', 'RETURN', 'RETURN_REVERSAL');

-- The references of authorizations and messages, checked once per statement as migration 0009
-- checks the ledger's: every authorization is one row and every message one or two, written in
-- batches while the cards' balance rows are locked, and a per-row foreign key is a query and a
-- FOR KEY SHARE lock per row and reference. Cards, like clients, are never deleted, truncated or
-- renumbered, and an authorization keeps its card and client, so checking that each statement's
-- new rows point at rows that exist is enough.
create trigger cards_never_removed before delete on cards
  for each row execute function emisor_refuse_removal();
create trigger cards_never_renumbered before update of id on cards
  for each row when (old.id is distinct from new.id) execute function emisor_refuse_removal();
create trigger cards_never_truncated before truncate on cards
  for each statement execute function emisor_refuse_removal();
create trigger card_authorizations_never_removed before delete on card_authorizations
  for each row execute function emisor_refuse_removal();
create trigger card_authorizations_never_reassigned before update of id, card_id, client_id on card_authorizations
  for each row when (old.id is distinct from new.id or old.card_id is distinct from new.card_id
    or old.client_id is distinct from new.client_id)
  execute function emisor_refuse_removal();
create trigger card_authorizations_never_truncated before truncate on card_authorizations
  for each statement execute function emisor_refuse_removal();

create function emisor_check_card_authorization_refs() returns trigger
language plpgsql set enable_seqscan = off set enable_hashjoin = off set enable_mergejoin = off as $$
begin
  if exists (select 1 from new_rows n where not exists (select 1 from cards c where c.id = n.card_id)) then
    raise exception using errcode = '23503', message = 'an authorization names a card that does not exist';
  end if;
  if exists (select 1 from new_rows n where not exists (select 1 from clients c where c.id = n.client_id)) then
    raise exception using errcode = '23503', message = 'an authorization names a client that does not exist';
  end if;
  return null;
end
$$;
create trigger card_authorizations_refs_on_insert after insert on card_authorizations
  referencing new table as new_rows for each statement execute function emisor_check_card_authorization_refs();

create function emisor_check_card_message_refs() returns trigger
language plpgsql set enable_seqscan = off set enable_hashjoin = off set enable_mergejoin = off as $$
begin
  if exists (select 1 from new_rows n
             where n.card_id is not null and not exists (select 1 from cards c where c.id = n.card_id)) then
    raise exception using errcode = '23503', message = 'a card message names a card that does not exist';
  end if;
  if exists (select 1 from new_rows n
             where n.client_id is not null and not exists (select 1 from clients c where c.id = n.client_id)) then
    raise exception using errcode = '23503', message = 'a card message names a client that does not exist';
  end if;
  if exists (select 1 from new_rows n where n.authorization_id is not null
             and not exists (select 1 from card_authorizations a where a.id = n.authorization_id)) then
    raise exception using errcode = '23503', message = 'a card message names an authorization that does not exist';
  end if;
  return null;
end
$$;
create trigger card_network_messages_refs_on_insert after insert on card_network_messages
  referencing new table as new_rows for each statement execute function emisor_check_card_message_refs();
create trigger card_network_messages_refs_on_update after update on card_network_messages
  referencing new table as new_rows for each statement execute function emisor_check_card_message_refs();

-- A processor's clearing file, processed once by its id; the report answers every repeat.
create table card_clearing_files (
  file_id text primary key,
  lines integer not null,
  report jsonb not null,
  created_at timestamptz not null default now()
);
