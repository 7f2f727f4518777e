-- +goose Up
-- A revoked signing key leaves the JWK set at once and signs nothing more;
-- its row stays (state "revoked") until expires_at, when no token it signed
-- can still be valid.
ALTER TABLE signing_keys ADD COLUMN revoked_at TIMESTAMPTZ;

-- +goose Down
ALTER TABLE signing_keys DROP COLUMN revoked_at;
