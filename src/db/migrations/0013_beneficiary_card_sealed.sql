-- A transfer out to a card kept the beneficiary's card number in clear in spei_orders (answers,
-- events and logs showed its last four digits only). The number is now sealed (AES-256-GCM under
-- the vault key, bound to the order's id) in beneficiary_card_sealed, and beneficiary_account
-- keeps the masked form the views show. SQL cannot seal: the service seals the rows stored before
-- this migration when it starts (sealStoredBeneficiaryCards), found through this partial index.
alter table spei_orders add column beneficiary_card_sealed text;

create index spei_orders_cards_to_seal on spei_orders (id)
  where beneficiary_account_type = 'CARD' and beneficiary_card_sealed is null;
