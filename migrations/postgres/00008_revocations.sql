-- +goose Up
-- The revocation feed (GET /v1/revocations): one row per revoked session or
-- signing key, written in the transaction that revokes it. seq orders the
-- rows; txid is the writing transaction, so that a reader's cursor (the
-- snapshot it read with) tells exactly which rows committed after it, even
-- when a transaction holding a lower seq commits after one holding a
-- higher. Rows leave once no token they could affect is still valid
-- (revoked_at + access-token TTL + clock skew), pruned by the issuer.
CREATE TABLE revocations (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('session', 'key')),
    id         TEXT NOT NULL,
    revoked_at TIMESTAMPTZ NOT NULL,
    txid       xid8 NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX revocations_revoked ON revocations (revoked_at);
CREATE INDEX revocations_txid ON revocations (txid);

-- Sessions that reach their absolute end (max_expires_at) unrevoked are in
-- the feed for one access-token lifetime after it, read from sessions.
CREATE INDEX sessions_lifetime_end ON sessions (max_expires_at) WHERE revoked_at IS NULL;

-- Every way a session ends sets its revoked_at once (logout, logout all,
-- password change or reset, reuse detection, disable, admin revoke, device
-- replacement): the feed row is written by the statement that sets it, so
-- in its transaction, whichever path it is.
-- +goose StatementBegin
CREATE FUNCTION sessions_revocation_feed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO revocations (kind, id, revoked_at) VALUES ('session', NEW.id, NEW.revoked_at);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER sessions_revocation_feed AFTER UPDATE OF revoked_at ON sessions
    FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
    EXECUTE FUNCTION sessions_revocation_feed();

-- +goose Down
DROP TRIGGER sessions_revocation_feed ON sessions;
DROP FUNCTION sessions_revocation_feed();
DROP INDEX sessions_lifetime_end;
DROP TABLE revocations;
