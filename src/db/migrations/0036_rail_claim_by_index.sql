-- The due jobs of a rail, reached through rail_outbox_due_idx in its order and no further than
-- the limit. rail_outbox is a queue: a pass of ANALYZE sees it empty or nearly, and a minute later
-- it holds thousands of jobs and many more dead index entries (each lease and each settlement
-- check moves next_attempt_at). Planned from such statistics, the claim read every due entry
-- with a bitmap scan and sorted them, which made every claim cost as much as the whole backlog.
-- The settings below leave the planner only the ordered index scan, whatever the statistics say.
create function emisor_due_rail_jobs(p_rail text, p_limit integer) returns setof bigint
language sql volatile
set enable_bitmapscan = off
set enable_seqscan = off
set enable_sort = off
as $$
  select id from rail_outbox
  where rail = p_rail and next_attempt_at <= now()
  order by next_attempt_at
  limit p_limit
  for update skip locked
$$;
