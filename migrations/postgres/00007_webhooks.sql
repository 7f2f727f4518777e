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
    secret          BYTEA NOT NULL,
    previous_secret BYTEA,
    previous_until  TIMESTAMPTZ,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
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
    next_attempt_at  TIMESTAMPTZ,
    lease_until      TIMESTAMPTZ,
    last_attempt_at  TIMESTAMPTZ,
    last_status_code INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT NOT NULL DEFAULT '',
    created_at       TIMESTAMPTZ NOT NULL
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

-- webhook_uuidv7 returns a UUIDv7 as text, as the product makes ids
-- (PostgreSQL 15 has no uuidv7()): 48 bits of Unix milliseconds, then the
-- random bits of a v4 UUID with its version changed to 7.
-- +goose StatementBegin
CREATE FUNCTION webhook_uuidv7() RETURNS text LANGUAGE sql VOLATILE AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                placing substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid::text
$$;
-- +goose StatementEnd

-- The outbox fill: every audit entry of a catalogue type becomes one
-- pending delivery per enabled endpoint subscribed to its type or to "*",
-- in the statement that writes the entry, so in its transaction, whichever
-- path writes it (AppendAudit, OpenSession, the one-statement refresh
-- rotation). FOR KEY SHARE keeps an endpoint being deleted meanwhile from
-- failing the insert's foreign key: the row is skipped instead.
-- +goose StatementBegin
CREATE FUNCTION webhook_outbox_fill() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, status, attempts, next_attempt_at, created_at)
    SELECT webhook_uuidv7(), e.id, NEW.id, NEW.type, 'pending', 0, NEW.occurred_at, NEW.occurred_at
    FROM webhook_endpoints e
    WHERE e.status = 'enabled'
        AND EXISTS (SELECT 1 FROM webhook_event_types t WHERE t.type = NEW.type)
        AND (e.events::jsonb ? NEW.type OR e.events::jsonb ? '*')
    FOR KEY SHARE OF e;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER audit_events_webhook_outbox AFTER INSERT ON audit_events
    FOR EACH ROW EXECUTE FUNCTION webhook_outbox_fill();

-- +goose Down
DROP TRIGGER audit_events_webhook_outbox ON audit_events;
DROP FUNCTION webhook_outbox_fill();
DROP FUNCTION webhook_uuidv7();
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
DROP TABLE webhook_event_types;
