-- The client and the payer's ledger account of each transfer out, checked once per statement
-- instead of once per row, as migration 0009 does for the ledger's own rows: a batch of transfers
-- inserts its orders in one statement, and each row's foreign keys were two more queries (and two
-- FOR KEY SHARE locks) per transfer while the card's balance row was locked. Clients and ledger
-- accounts are never deleted, truncated or renumbered (0009), so checking that the statement's new
-- rows point at rows that exist is enough, with an order's client and payer never changed. The
-- reference to the order's journal entry stays a deferred foreign key: the entry is written after
-- the order, at the end of the transaction.

alter table spei_orders drop constraint spei_orders_client_id_fkey;
alter table spei_orders drop constraint spei_orders_payer_account_id_fkey;

create function emisor_check_spei_order_refs() returns trigger
language plpgsql set enable_seqscan = off set enable_hashjoin = off set enable_mergejoin = off as $$
begin
  if exists (select 1 from new_orders n where not exists (select 1 from clients c where c.id = n.client_id)) then
    raise exception using errcode = '23503', message = 'a transfer out names a client that does not exist';
  end if;
  if exists (select 1 from new_orders n
             where not exists (select 1 from ledger_accounts a where a.id = n.payer_account_id)) then
    raise exception using errcode = '23503', message = 'a transfer out names a ledger account that does not exist';
  end if;
  return null;
end
$$;
create trigger spei_orders_refs_on_insert after insert on spei_orders
  referencing new table as new_orders for each statement execute function emisor_check_spei_order_refs();

-- An order's client and payer never change: refusing the change keeps the check off every state
-- change of an order (a trigger with a transition table cannot be limited to some columns).
create function emisor_refuse_spei_order_reassignment() returns trigger
language plpgsql as $$
begin
  raise exception using errcode = '23503', message = 'a transfer out keeps its client and its payer';
end
$$;
create trigger spei_orders_never_reassigned before update of client_id, payer_account_id on spei_orders
  for each row when (old.client_id is distinct from new.client_id or old.payer_account_id is distinct from new.payer_account_id)
  execute function emisor_refuse_spei_order_reassignment();
