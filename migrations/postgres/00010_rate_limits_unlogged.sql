-- +goose Up
-- Rate-limit counters are not worth WAL: an unlogged table's changes are
-- not written ahead, so a check's commit waits for no disk flush. A crash
-- empties the table, which loses only counters (every key starts with its
-- whole quota) and the remembered login addresses (their owners pass the
-- login_email ceiling again after one login). Unlogged tables are not
-- replicated either: a promoted standby starts with no counters.
ALTER TABLE rate_limits SET UNLOGGED;

-- +goose Down
ALTER TABLE rate_limits SET LOGGED;
