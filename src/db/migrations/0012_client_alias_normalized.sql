-- Aliases are compared in Unicode's compatibility form (NFKC) as well as ignoring case: "CAFÉ"
-- written with a precomposed É and with E + a combining accent, or "ＮＯＲＴＥ" in full-width
-- letters and "NORTE", are the same alias to a person reading assigned_by, so one organisation
-- may not hold both. The alias is stored as sent; only the uniqueness compares the normal form.
drop index clients_root_alias_uq;
create unique index clients_root_alias_uq on clients (root_id, lower(normalize(alias, NFKC)));
