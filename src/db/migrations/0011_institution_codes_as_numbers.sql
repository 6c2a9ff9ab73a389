-- SPEI institution codes of incoming transfers are kept as their number, the catalog's key
-- (40012, 90646, Banxico's 2001): they were padded to five digits, which turned Banxico into
-- "02001", a code the catalog does not have. The sender's code is part of an abono's identity
-- (with the day and the tracking key), so stored rows take the same form as new ones: a
-- redelivery of an abono stored before this migration is still recognised as a duplicate.
-- Padding was applied to every stored sender code, so removing it cannot make two rows collide.
update transfer_operations
set institucion_ordenante = coalesce(nullif(ltrim(institucion_ordenante, '0'), ''), '0')
where institucion_ordenante like '0%';

update transfer_operations
set institucion_beneficiaria = coalesce(nullif(ltrim(institucion_beneficiaria, '0'), ''), '0')
where institucion_beneficiaria like '0%';
