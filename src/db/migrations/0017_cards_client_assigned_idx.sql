-- GET /v1/cards lists a subtree's assigned cards newest first: for each client of the subtree it
-- reads that client's newest cards in (assigned_at, id) order, one index range each, so a page
-- costs the same with ten cards or millions (EXPLAIN on 64,000 cards: 30-130 ms by top-N sort of
-- every card of the subtree before, 0.3-3 ms with this index). Stock has no client: left out.
create index cards_client_assigned_idx on cards (client_id, assigned_at desc, id desc)
  where client_id is not null;
-- Every lookup by client_id names a client, so the index above serves it; this one only cost writes.
drop index cards_client_idx;
