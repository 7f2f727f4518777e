-- +goose Up
-- PostgreSQL makes rate_limits unlogged; SQLite has no such thing. This
-- keeps both dialects at the same version.
SELECT 1;

-- +goose Down
SELECT 1;
