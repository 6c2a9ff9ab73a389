-- Tracking keys of abonos stored before they were upper-cased on arrival (kept as the rail sent
-- them) are upper-cased, so a redelivery in any letter case finds its abono through the unique key
-- and is credited once: looked up as sent, mban… was found, but MBAN… was not, and was credited
-- again. One row per key takes the upper-case spelling (the first stored); a row whose upper-case
-- spelling is already taken (the same transfer credited twice before that change) keeps its own,
-- since the lookup finds the upper-case one first.
update transfer_operations t
set clave_rastreo = upper(t.clave_rastreo)
from (
  select distinct on (o.fecha_operacion, o.institucion_ordenante, upper(o.clave_rastreo)) o.id
  from transfer_operations o
  where o.clave_rastreo <> upper(o.clave_rastreo)
    and not exists (
      select 1 from transfer_operations u
      where u.fecha_operacion = o.fecha_operacion
        and u.institucion_ordenante = o.institucion_ordenante
        and u.clave_rastreo = upper(o.clave_rastreo))
  order by o.fecha_operacion, o.institucion_ordenante, upper(o.clave_rastreo), o.created_at, o.id
) first_stored
where t.id = first_stored.id;
