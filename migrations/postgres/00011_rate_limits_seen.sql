-- +goose Up
-- The latest time a take of the key ran at (Unix microseconds). A take that
-- carries an earlier one (it waited behind a later request, or its
-- replica's clock lags) runs at this time instead, so a key's time never
-- goes back and its quota's last request is not refused by the delay.
ALTER TABLE rate_limits ADD COLUMN seen BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE rate_limits DROP COLUMN seen;
