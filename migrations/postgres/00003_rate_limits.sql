-- +goose Up
-- GCRA state of the shared rate limits: one theoretical arrival time per key
-- (Unix microseconds). A key whose tat is in the past is as good as absent,
-- which is what the sweeper deletes. Keys hold hashes, never an address or
-- an email in clear.
CREATE TABLE rate_limits (
    key    TEXT PRIMARY KEY,
    tat    BIGINT NOT NULL,
    denied BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX rate_limits_tat ON rate_limits (tat);

-- +goose Down
DROP TABLE rate_limits;
