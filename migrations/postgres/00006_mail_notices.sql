-- +goose Up
-- Notice mails (the password was changed or reset) carry no link, only what
-- they report: a JSON object with when it happened and the client's address
-- and user agent. NULL for link mails; emptied once the mail is sent or
-- given up, like the sealed token.
ALTER TABLE mail_outbox ADD COLUMN notice TEXT;

-- +goose Down
ALTER TABLE mail_outbox DROP COLUMN notice;
