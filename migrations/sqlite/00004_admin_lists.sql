-- +goose Up
-- The operators' user listing pages through users oldest first.
CREATE INDEX users_created ON users (created_at, id);

-- +goose Down
DROP INDEX users_created;
