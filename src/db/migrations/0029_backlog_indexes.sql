-- /metrics reads the backlogs an operator watches (webhook deliveries pending, the SPEI outbox,
-- airtime top-ups pending) at every scrape: each gauge is a bounded count and a min() over one of
-- these indexes, so a scrape costs a few index pages however large the tables grow. The partial
-- ones hold only the rows still waiting, so they stay as small as the backlog itself.
create index webhook_deliveries_pending_created_idx on webhook_deliveries (created_at)
  where status = 'PENDING';
create index rail_outbox_rail_created_idx on rail_outbox (rail, created_at);
create index airtime_topups_pending_created_idx on airtime_topups (created_at)
  where status = 'PENDING';
