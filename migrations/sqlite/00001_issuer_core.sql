-- +goose Up
-- SQLite: TIMESTAMP columns hold the driver's text form of UTC times, which
-- sorts in time order; the store always writes UTC truncated to microseconds.
CREATE TABLE users (
    id                TEXT PRIMARY KEY,
    email             TEXT NOT NULL,
    email_normalized  TEXT NOT NULL UNIQUE,
    password_hash     TEXT NOT NULL,
    name              TEXT NOT NULL DEFAULT '',
    role              TEXT NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('enabled', 'disabled')),
    email_verified_at TIMESTAMP,
    tenant_id         TEXT NOT NULL DEFAULT '',
    organization_id   TEXT NOT NULL DEFAULT '',
    created_at        TIMESTAMP NOT NULL,
    updated_at        TIMESTAMP NOT NULL
);

-- One row per device login; a session is one refresh-token family.
CREATE TABLE sessions (
    id            TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    device_id     TEXT NOT NULL,
    device_name   TEXT NOT NULL DEFAULT '',
    user_agent    TEXT NOT NULL DEFAULT '',
    ip            TEXT NOT NULL DEFAULT '',
    created_at    TIMESTAMP NOT NULL,
    last_used_at  TIMESTAMP NOT NULL,
    expires_at    TIMESTAMP NOT NULL,
    revoked_at    TIMESTAMP,
    revoke_reason TEXT NOT NULL DEFAULT ''
);
CREATE INDEX sessions_user_active ON sessions (user_id, device_id) WHERE revoked_at IS NULL;

-- Only the SHA-256 of a refresh token is ever stored.
CREATE TABLE refresh_tokens (
    token_hash  TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    parent_hash TEXT NOT NULL DEFAULT '',
    issued_at   TIMESTAMP NOT NULL,
    expires_at  TIMESTAMP NOT NULL,
    rotated_at  TIMESTAMP,
    revoked_at  TIMESTAMP
);
CREATE INDEX refresh_tokens_session ON refresh_tokens (session_id);
CREATE INDEX refresh_tokens_user_live ON refresh_tokens (user_id) WHERE revoked_at IS NULL;
CREATE INDEX refresh_tokens_parent ON refresh_tokens (parent_hash) WHERE parent_hash <> '';

CREATE TABLE audit_events (
    id          TEXT PRIMARY KEY,
    type        TEXT NOT NULL,
    occurred_at TIMESTAMP NOT NULL,
    user_id     TEXT NOT NULL DEFAULT '',
    session_id  TEXT NOT NULL DEFAULT '',
    actor_id    TEXT NOT NULL DEFAULT '',
    ip          TEXT NOT NULL DEFAULT '',
    user_agent  TEXT NOT NULL DEFAULT '',
    request_id  TEXT NOT NULL DEFAULT '',
    data        TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_events_time ON audit_events (occurred_at DESC, id DESC);
CREATE INDEX audit_events_user ON audit_events (user_id, occurred_at DESC) WHERE user_id <> '';
CREATE INDEX audit_events_type ON audit_events (type, occurred_at DESC);

-- Private keys are sealed (AES-256-GCM under the key-encryption key) before
-- they reach this table.
CREATE TABLE signing_keys (
    kid          TEXT PRIMARY KEY,
    alg          TEXT NOT NULL,
    public_jwk   TEXT NOT NULL,
    private_key  BLOB NOT NULL,
    created_at   TIMESTAMP NOT NULL,
    activates_at TIMESTAMP NOT NULL,
    retires_at   TIMESTAMP,
    expires_at   TIMESTAMP
);

CREATE TABLE idempotency_keys (
    scope        TEXT NOT NULL,
    idem_key     TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    status       INTEGER NOT NULL DEFAULT 0,
    body         BLOB,
    created_at   TIMESTAMP NOT NULL,
    PRIMARY KEY (scope, idem_key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

-- +goose Down
DROP TABLE idempotency_keys;
DROP TABLE signing_keys;
DROP TABLE audit_events;
DROP TABLE refresh_tokens;
DROP TABLE sessions;
DROP TABLE users;
