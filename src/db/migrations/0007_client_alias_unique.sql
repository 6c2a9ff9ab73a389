-- A client's alias names it to its parent and siblings (card assignment shows it as assigned_by),
-- so two clients of one organisation (one root) may not share it, whatever the letter case.
-- Aliases of different organisations may repeat: a 409 must not reveal another tenant's client.
create unique index clients_root_alias_uq on clients (root_id, lower(alias));
