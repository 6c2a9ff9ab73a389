-- The authorizations a client's decision endpoint is deciding, in a table of their own. Recording
-- a decision then changes no indexed column of card_authorizations, and with room left in each
-- page (fillfactor) the update of the authorization and of its message stays in the page (a
-- heap-only update) instead of writing a new entry in every index of the table, as a partial
-- index on `decision` made it do. Triggers keep the set: a row enters with an AWAITING
-- authorization and leaves when its decision is recorded, whatever statement records it.
create table card_decisions_awaiting (
  authorization_id uuid primary key,
  created_at timestamptz not null
);
insert into card_decisions_awaiting
  select id, created_at from card_authorizations where decision = 'AWAITING';
drop index card_authorizations_awaiting_idx;

create function emisor_decision_awaiting() returns trigger
language plpgsql as $$
begin
  if tg_op = 'INSERT' then
    insert into card_decisions_awaiting (authorization_id, created_at) values (new.id, new.created_at);
  else
    delete from card_decisions_awaiting where authorization_id = new.id;
  end if;
  return null;
end
$$;
create trigger card_authorizations_awaiting_on_insert after insert on card_authorizations
  for each row when (new.decision = 'AWAITING') execute function emisor_decision_awaiting();
create trigger card_authorizations_awaiting_on_update after update of decision on card_authorizations
  for each row when (old.decision = 'AWAITING' and new.decision is distinct from 'AWAITING')
  execute function emisor_decision_awaiting();

alter table card_authorizations set (fillfactor = 85);
alter table card_network_messages set (fillfactor = 85);
