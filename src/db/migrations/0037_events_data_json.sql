-- An event's data is written once, read whole (listings, webhook deliveries) and never queried
-- inside: nothing needs jsonb's parsed form, and building it is most of the cost of writing an
-- event (for a transfer's document, about 42 us of PostgreSQL's CPU as jsonb against 7 as json).
-- json keeps the text as Emisor wrote it, valid JSON, its keys in the order they were written.
alter table events alter column data type json using data::json;
