-- Spending controls: what a client says its cards may buy, at one of four scopes (a product, a
-- client and its subtree, a cardholder, a card). A control applies to a card when its target names
-- the card, the card's cardholder, its product or one of its clients, and its owner is one of the
-- card's clients: a product's control never reaches the cards of a client outside its owner's tree.
create table spending_controls (
  id uuid primary key,
  owner_client_id uuid not null references clients (id),
  scope text not null check (scope in ('PRODUCT', 'CLIENT', 'CARDHOLDER', 'CARD')),
  target_id uuid not null,
  type text not null check (type in ('VELOCITY_LIMIT', 'MCC', 'MERCHANT_COUNTRY', 'CHANNEL', 'MAX_AMOUNT')),
  -- The type's fields, normalized (amounts in centavos as text, codes upper case).
  rule jsonb not null,
  description text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index spending_controls_target_idx on spending_controls (target_id);
create index spending_controls_owner_idx on spending_controls (owner_client_id, created_at, id);

-- Bumped by every change of a control, in its transaction: a process deciding authorizations on
-- the controls it read at one value refuses its batch once another process changed any of them.
create table spending_control_generation (
  id boolean primary key default true check (id),
  generation bigint not null
);
insert into spending_control_generation (generation) values (0);

-- What each card spent in the calendar windows of Mexico City that contain now: approved holds and
-- clearings of its authorizations, given back when a hold is released in the same window. Each
-- window's key names it (days since 1970-01-01; the Monday that starts the ISO week, as such a day;
-- year * 12 + month - 1; the year), and a key older than now's means nothing spent in that window
-- yet. A card's row is written with its money (the card's ledger row locked), so counting is exact.
create table card_spending (
  card_id uuid primary key references cards (id),
  day_key integer not null,
  day_cents bigint not null,
  day_count integer not null,
  week_key integer not null,
  week_cents bigint not null,
  week_count integer not null,
  month_key integer not null,
  month_cents bigint not null,
  month_count integer not null,
  year_key integer not null,
  year_cents bigint not null,
  year_count integer not null,
  lifetime_cents bigint not null,
  lifetime_count integer not null
) with (fillfactor = 70);

-- Each card that was ever authorized starts from what its authorizations hold and cleared.
with spent as (
  select card_id, held_cents + cleared_cents as cents,
    (created_at at time zone 'America/Mexico_City')::date as day
  from card_authorizations where status <> 'DECLINED' and held_cents + cleared_cents > 0),
today as (select (now() at time zone 'America/Mexico_City')::date as day)
insert into card_spending
select s.card_id,
  t.day - date '1970-01-01',
  coalesce(sum(s.cents) filter (where s.day = t.day), 0), count(*) filter (where s.day = t.day),
  date_trunc('week', t.day)::date - date '1970-01-01',
  coalesce(sum(s.cents) filter (where date_trunc('week', s.day) = date_trunc('week', t.day)), 0),
  count(*) filter (where date_trunc('week', s.day) = date_trunc('week', t.day)),
  (extract(year from t.day) * 12 + extract(month from t.day) - 1)::integer,
  coalesce(sum(s.cents) filter (where date_trunc('month', s.day) = date_trunc('month', t.day)), 0),
  count(*) filter (where date_trunc('month', s.day) = date_trunc('month', t.day)),
  extract(year from t.day)::integer,
  coalesce(sum(s.cents) filter (where date_trunc('year', s.day) = date_trunc('year', t.day)), 0),
  count(*) filter (where date_trunc('year', s.day) = date_trunc('year', t.day)),
  sum(s.cents), count(*)
from spent s cross join today t
group by s.card_id, t.day;

-- The client's real-time decision on an authorization (a client's decision endpoint): AWAITING
-- while the hold is taken and the client is asked, then ANSWERED or STOOD_IN (its stand-in applied
-- on a timeout or a bad answer). Null when no endpoint was asked. What the client returned is kept.
alter table card_authorizations add column decision text
  check (decision in ('AWAITING', 'ANSWERED', 'STOOD_IN'));
alter table card_authorizations add column decision_metadata jsonb;
create index card_authorizations_awaiting_idx on card_authorizations (created_at) where decision = 'AWAITING';

-- Card-not-present purchases give the CVV2: wrong ones in a row are counted, and each run of them
-- that reaches the bound raises an event; a right one starts the count again.
alter table cards add column cvv_failures integer not null default 0;
