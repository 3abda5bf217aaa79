-- Bumped by `turnstone plugins reload` / the admin API: every node reloads the
-- plugin from disk when it sees a new value.
ALTER TABLE plugins ADD COLUMN reload_seq BIGINT NOT NULL DEFAULT 0;
