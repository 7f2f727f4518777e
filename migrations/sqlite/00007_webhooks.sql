-- +goose Up
-- The catalogue of event types webhooks deliver (store.WebhookEvents). An
-- endpoint subscribed to "*" gets every type listed here and no other:
-- audit-only types (user.updated, ...) are never delivered.
CREATE TABLE webhook_event_types (
    type TEXT PRIMARY KEY
);
INSERT INTO webhook_event_types (type) VALUES
    ('user.registered'), ('user.logged_in'), ('login.failed'), ('user.logged_out'),
    ('user.logged_out_all'), ('password.changed'), ('password.reset_requested'),
    ('password.reset'), ('email.verified'), ('refresh_token.used'),
    ('refresh_token.reused'), ('session.revoked'), ('user.disabled'), ('user.enabled'),
    ('signing_key.rotated'), ('signing_key.revoked');

-- Registered receivers. events is a JSON array of types, or ["*"]. The
-- secrets are sealed (AES-256-GCM under the key-encryption key) before they
-- reach this table; previous_secret signs until previous_until (a rotation's
-- overlap).
CREATE TABLE webhook_endpoints (
    id              TEXT PRIMARY KEY,
    url             TEXT NOT NULL,
    events          TEXT NOT NULL,
    description     TEXT NOT NULL DEFAULT '',
    format          TEXT NOT NULL CHECK (format IN ('seed', 'standard-webhooks')),
    status          TEXT NOT NULL CHECK (status IN ('enabled', 'disabled')),
    secret          BLOB NOT NULL,
    previous_secret BLOB,
    previous_until  TIMESTAMP,
    created_at      TIMESTAMP NOT NULL,
    updated_at      TIMESTAMP NOT NULL
);
CREATE INDEX webhook_endpoints_created ON webhook_endpoints (created_at, id);

-- The outbox: one row per event and subscribed endpoint. next_attempt_at is
-- set while pending; lease_until while a dispatcher holds the row.
CREATE TABLE webhook_deliveries (
    id               TEXT PRIMARY KEY,
    endpoint_id      TEXT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id         TEXT NOT NULL REFERENCES audit_events (id) ON DELETE CASCADE,
    event_type       TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMP,
    lease_until      TIMESTAMP,
    last_attempt_at  TIMESTAMP,
    last_status_code INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT NOT NULL DEFAULT '',
    created_at       TIMESTAMP NOT NULL
);
-- Claiming: the due pending deliveries, oldest due first.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, id) WHERE status = 'pending';
-- The per-endpoint cap counts the leases held; a lease is cleared when the
-- attempt is recorded, so few rows are here.
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (endpoint_id) WHERE lease_until IS NOT NULL;
-- An endpoint's deliveries, newest first.
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, created_at DESC, id DESC);
-- Pruning finished deliveries, and the age of the oldest pending one.
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (created_at) WHERE status <> 'pending';
CREATE INDEX webhook_deliveries_pending_age ON webhook_deliveries (created_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

-- The outbox fill: every audit entry of a catalogue type becomes one
-- pending delivery per enabled endpoint subscribed to its type or to "*",
-- in the statement that writes the entry, so in its transaction, whichever
-- path writes it. The id is a UUIDv7 as text, as the product makes ids:
-- 48 bits of Unix milliseconds, version 7, random bits, variant 10.
-- +goose StatementBegin
CREATE TRIGGER audit_events_webhook_outbox AFTER INSERT ON audit_events
FOR EACH ROW
BEGIN
    INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, status, attempts, next_attempt_at, created_at)
    SELECT
        substr(printf('%012x', CAST(unixepoch('subsec') * 1000 AS INTEGER)), 1, 8) || '-' ||
        substr(printf('%012x', CAST(unixepoch('subsec') * 1000 AS INTEGER)), 9, 4) || '-7' ||
        substr(lower(hex(randomblob(2))), 2, 3) || '-' ||
        substr('89ab', 1 + (random() & 3), 1) || substr(lower(hex(randomblob(2))), 2, 3) || '-' ||
        lower(hex(randomblob(6))),
        e.id, NEW.id, NEW.type, 'pending', 0, NEW.occurred_at, NEW.occurred_at
    FROM webhook_endpoints e
    WHERE e.status = 'enabled'
        AND EXISTS (SELECT 1 FROM webhook_event_types t WHERE t.type = NEW.type)
        AND EXISTS (SELECT 1 FROM json_each(e.events) j WHERE j.value = NEW.type OR j.value = '*');
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER audit_events_webhook_outbox;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
DROP TABLE webhook_event_types;
