-- +goose Up
-- A session's absolute end, fixed at login (--session-max-lifetime): its
-- sliding expiry and every refresh token in it end no later. Stored per
-- session, so that changing the flag later moves no session's end.
-- Sessions opened before this migration end 90 days (the flag's default)
-- after their login; their expiry and their refresh tokens' are capped to it.
ALTER TABLE sessions ADD COLUMN max_expires_at TIMESTAMPTZ;
UPDATE sessions SET max_expires_at = created_at + INTERVAL '90 days';
ALTER TABLE sessions ALTER COLUMN max_expires_at SET NOT NULL;
UPDATE sessions SET expires_at = max_expires_at WHERE expires_at > max_expires_at;
UPDATE refresh_tokens rt SET expires_at = s.max_expires_at
FROM sessions s WHERE s.id = rt.session_id AND rt.expires_at > s.max_expires_at;

-- +goose Down
ALTER TABLE sessions DROP COLUMN max_expires_at;
