-- +goose Up
-- A session's absolute end, fixed at login (--session-max-lifetime): its
-- sliding expiry and every refresh token in it end no later. Stored per
-- session, so that changing the flag later moves no session's end.
-- Sessions opened before this migration end 90 days (the flag's default)
-- after their login; their expiry and their refresh tokens' are capped to it.
-- Times are stored as text, 'YYYY-MM-DD HH:MM:SS[.f]+00:00'; adding days
-- leaves the time of day as it is.
ALTER TABLE sessions ADD COLUMN max_expires_at TIMESTAMP NOT NULL DEFAULT '';
UPDATE sessions SET max_expires_at = date(created_at, '+90 days') || substr(created_at, 11);
UPDATE sessions SET expires_at = max_expires_at WHERE expires_at > max_expires_at;
UPDATE refresh_tokens SET expires_at = (SELECT s.max_expires_at FROM sessions s WHERE s.id = refresh_tokens.session_id)
WHERE expires_at > (SELECT s.max_expires_at FROM sessions s WHERE s.id = refresh_tokens.session_id);

-- +goose Down
ALTER TABLE sessions DROP COLUMN max_expires_at;
