-- Aliases are compared in Unicode's compatibility form (NFKC) as well as ignoring case: "CAFÉ"
-- written with a precomposed É and with E + a combining accent, or "ＮＯＲＴＥ" in full-width
-- letters and "NORTE", are the same alias to a person reading assigned_by, so one organisation
-- may not hold both. The alias is stored as sent; only the uniqueness compares the normal form.
--
-- Corrected in place (the third audit; migrate.ts accepts the first text's checksum): an earlier
-- release accepted such pairs, and the index could not be built over them. The first client of
-- each such group keeps its alias; the others get " #" and the first 8 characters of their id
-- appended, which is unique.
update clients c
set alias = c.alias || ' #' || left(c.id::text, 8)
from (
  select id,
    row_number() over (partition by root_id, lower(normalize(alias, NFKC)) order by created_at, id) as rank
  from clients
) d
where c.id = d.id and d.rank > 1;

drop index clients_root_alias_uq;
create unique index clients_root_alias_uq on clients (root_id, lower(normalize(alias, NFKC)));
