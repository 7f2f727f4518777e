-- +goose Up
-- Password-reset and email-verification tokens: only their SHA-256 is kept.
CREATE TABLE one_time_tokens (
    token_hash TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    purpose    TEXT NOT NULL CHECK (purpose IN ('password_reset', 'verify_email')),
    created_at TIMESTAMP NOT NULL,
    expires_at TIMESTAMP NOT NULL,
    used_at    TIMESTAMP
);
CREATE INDEX one_time_tokens_user_live ON one_time_tokens (user_id, purpose) WHERE used_at IS NULL;

-- The durable mail queue. The link token travels sealed under the
-- key-encryption key, and is dropped once the mail is sent or given up.
CREATE TABLE mail_outbox (
    id              TEXT PRIMARY KEY,
    kind            TEXT NOT NULL,
    user_id         TEXT NOT NULL DEFAULT '',
    to_addr         TEXT NOT NULL,
    name            TEXT NOT NULL DEFAULT '',
    sealed_token    BLOB,
    attempts        INTEGER NOT NULL DEFAULT 0,
    created_at      TIMESTAMP NOT NULL,
    next_attempt_at TIMESTAMP NOT NULL,
    sent_at         TIMESTAMP,
    failed_at       TIMESTAMP,
    last_error      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX mail_outbox_due ON mail_outbox (next_attempt_at) WHERE sent_at IS NULL AND failed_at IS NULL;
CREATE INDEX mail_outbox_user ON mail_outbox (user_id, kind, created_at);

-- +goose Down
DROP TABLE mail_outbox;
DROP TABLE one_time_tokens;
