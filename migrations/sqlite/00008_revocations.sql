-- +goose Up
-- The revocation feed (GET /v1/revocations): one row per revoked session or
-- signing key, written in the transaction that revokes it. seq orders the
-- rows: SQLite runs one write transaction at a time, so seq order is commit
-- order and a reader's cursor is the highest seq it has seen.
-- AUTOINCREMENT keeps a seq from being used twice after pruning emptied the
-- table. Rows leave once no token they could affect is still valid
-- (revoked_at + access-token TTL + clock skew), pruned by the issuer.
CREATE TABLE revocations (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    kind       TEXT NOT NULL CHECK (kind IN ('session', 'key')),
    id         TEXT NOT NULL,
    revoked_at TIMESTAMP NOT NULL
);
CREATE INDEX revocations_revoked ON revocations (revoked_at);

-- Sessions that reach their absolute end (max_expires_at) unrevoked are in
-- the feed for one access-token lifetime after it, read from sessions.
CREATE INDEX sessions_lifetime_end ON sessions (max_expires_at) WHERE revoked_at IS NULL;

-- Every way a session ends sets its revoked_at once (logout, logout all,
-- password change or reset, reuse detection, disable, admin revoke, device
-- replacement): the feed row is written by the statement that sets it, so
-- in its transaction, whichever path it is.
-- +goose StatementBegin
CREATE TRIGGER sessions_revocation_feed AFTER UPDATE OF revoked_at ON sessions
FOR EACH ROW WHEN OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL
BEGIN
    INSERT INTO revocations (kind, id, revoked_at) VALUES ('session', NEW.id, NEW.revoked_at);
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER sessions_revocation_feed;
DROP INDEX sessions_lifetime_end;
DROP TABLE revocations;
