-- +goose Up
-- The latest time a take of the key ran at (see the PostgreSQL migration).
ALTER TABLE rate_limits ADD COLUMN seen INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE rate_limits DROP COLUMN seen;
