-- SPEI institution codes of incoming transfers are kept as their number, the catalog's key
-- (40012, 90646, Banxico's 2001): they were padded to five digits, which turned Banxico into
-- "02001", a code the catalog does not have. The sender's code is part of an abono's identity
-- (with the day and the tracking key), so stored rows take the same form as new ones: a
-- redelivery of an abono stored before this migration is still recognised as a duplicate.
--
-- Corrected in place (the third audit; migrate.ts accepts the first text's checksum): releases
-- before the padding stored codes as sent, so one abono could be stored twice, as "2001" and
-- "02001" (it was credited twice then). Of the rows one normal form would make collide, the one
-- already in that form, or else the first stored, takes it; the others keep their code as stored,
-- so the migration never fails on them.
update transfer_operations o
set institucion_ordenante = n.normal
from (
  select id, normal,
    row_number() over (
      partition by fecha_operacion, clave_rastreo, normal
      order by (institucion_ordenante = normal) desc, id
    ) as rank
  from (
    select id, fecha_operacion, clave_rastreo, institucion_ordenante,
      coalesce(nullif(ltrim(institucion_ordenante, '0'), ''), '0') as normal
    from transfer_operations
  ) codes
) n
where o.id = n.id and n.rank = 1 and o.institucion_ordenante <> n.normal;

update transfer_operations
set institucion_beneficiaria = coalesce(nullif(ltrim(institucion_beneficiaria, '0'), ''), '0')
where institucion_beneficiaria like '0%';
