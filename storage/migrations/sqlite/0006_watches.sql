-- Watches (the `watch` tool): a command polled until its stop condition
-- holds. The scheduler of a node claims due watches for a lease, so two
-- nodes on one database never poll the same watch; a result is kept until
-- it was delivered to its workstream.
ALTER TABLE watches ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE watches ADD COLUMN plugin TEXT NOT NULL DEFAULT 'watch';
ALTER TABLE watches ADD COLUMN next_poll TEXT;
ALTER TABLE watches ADD COLUMN claimed_by TEXT;
ALTER TABLE watches ADD COLUMN claimed_until TEXT;
ALTER TABLE watches ADD COLUMN last_exit_code INTEGER;
ALTER TABLE watches ADD COLUMN last_error TEXT;
ALTER TABLE watches ADD COLUMN result TEXT;
ALTER TABLE watches ADD COLUMN delivered TEXT;
CREATE INDEX watches_due ON watches (state, next_poll);
CREATE INDEX watches_ws ON watches (ws_id, state);
