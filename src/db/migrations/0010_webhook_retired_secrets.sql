-- A webhook endpoint's retired signing secrets, newest last: [{"sealed": text, "expires_at": ISO
-- 8601}]. Each keeps signing every delivery (one more signature in webhook-signature) until its
-- own expiry. With one "previous secret" column, rotating twice within the grace period dropped
-- the first secret at once, cutting off a receiver that had not yet switched (or whose first
-- rotation answer was lost).
alter table webhook_endpoints add column retired_secrets jsonb not null default '[]'::jsonb;

update webhook_endpoints
set retired_secrets = jsonb_build_array(jsonb_build_object(
  'sealed', previous_secret_sealed,
  'expires_at', to_char(previous_secret_expires_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))
where previous_secret_sealed is not null and previous_secret_expires_at > now();

alter table webhook_endpoints drop column previous_secret_sealed;
alter table webhook_endpoints drop column previous_secret_expires_at;
