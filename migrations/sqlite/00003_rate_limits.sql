-- +goose Up
-- GCRA state of the rate limits (see the PostgreSQL migration).
CREATE TABLE rate_limits (
    key    TEXT PRIMARY KEY,
    tat    INTEGER NOT NULL,
    denied INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX rate_limits_tat ON rate_limits (tat);

-- +goose Down
DROP TABLE rate_limits;
