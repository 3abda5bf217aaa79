-- Where a user's (or a workstream's) notifications go: webhooks, and chat
-- channels once channel adapters run. A workstream's targets go with it.
CREATE TABLE notify_targets (
    target_id    TEXT PRIMARY KEY,
    user_id      TEXT,
    ws_id        TEXT REFERENCES workstreams (ws_id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('webhook', 'channel')),
    url          TEXT,
    secret       TEXT,
    channel_type TEXT,
    channel_id   TEXT,
    created      TEXT NOT NULL
);
CREATE UNIQUE INDEX notify_targets_user_name ON notify_targets (user_id, name) WHERE ws_id IS NULL;
CREATE UNIQUE INDEX notify_targets_ws_name ON notify_targets (ws_id, name) WHERE ws_id IS NOT NULL;
