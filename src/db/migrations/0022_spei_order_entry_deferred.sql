-- A transfer out writes its order before its ledger entry: the entry credits the rows every
-- client's transfers share (SPEI_OUT, commission, IVA), so it is the transaction's last statement
-- and those rows are held only until the commit. The order's reference to its entry is checked at
-- the commit instead of at the insert.
alter table spei_orders alter constraint spei_orders_entry_id_fkey deferrable initially deferred;
