-- The expiry worker's index of pending holds also matched the sum of what a card's pending holds
-- hold (both partial on status = 'PENDING'), and a plan made while the table was small could pick
-- it for that sum and then read every pending hold of every card, for each card. Its predicate now
-- names expires_at, which the worker's query implies and the card's sum does not.
drop index card_authorizations_expiry_idx;
create index card_authorizations_expiry_idx on card_authorizations (expires_at)
  where status = 'PENDING' and expires_at is not null;
