-- GET /v1/events pages by the transaction that wrote each event, then by seq, and lists an event
-- only once every transaction of this database that could still write an event before it has
-- ended (modules/events/repository.ts). Ordered by seq alone, an event whose transaction
-- committed after a later-numbered one's could land behind a cursor already handed out, and a
-- poller would never see it.
--
-- xid is the writing transaction's 64-bit id. Rows written before this migration all get this
-- migration's id, in seq order, which is how a cursor of an earlier release (a bare seq) is read.
alter table events add column xid xid8 not null default pg_current_xact_id();

create unique index events_xid_seq_idx on events (xid, seq);
create index events_client_xid_seq_idx on events (client_id, xid, seq);
create index events_type_xid_seq_idx on events (type, xid, seq);
drop index events_client_seq_idx;
drop index events_type_seq_idx;
-- seq stays unique by construction (an identity); its own index served only the old order.
alter table events drop constraint events_seq_key;
