-- Who disabled a client (PUT /v1/clients/{id}/status): only that client or one above it enables it
-- again, so a lower ancestor cannot undo a higher one's decision (a root freezing a client for a
-- fraud review) and send money in. Null for an active client, and for one disabled before this
-- column existed (any ancestor may enable it, as before).
alter table clients add column disabled_by_client_id uuid references clients (id);
