-- Chat channels: which workstream a platform conversation (a channel, a
-- thread in it, a DM) belongs to, and one-time codes a signed-in user sends
-- the bot to link their platform account (`channel_users`).
CREATE TABLE channel_routes (
    plugin     TEXT NOT NULL,
    channel_id TEXT NOT NULL,
    thread_id  TEXT NOT NULL DEFAULT '',
    ws_id      TEXT NOT NULL,
    user_id    TEXT NOT NULL REFERENCES users (user_id) ON DELETE CASCADE,
    created    TEXT NOT NULL,
    PRIMARY KEY (plugin, channel_id, thread_id)
);
CREATE INDEX channel_routes_ws ON channel_routes (ws_id);

CREATE TABLE channel_link_codes (
    code_hash TEXT PRIMARY KEY,
    user_id   TEXT NOT NULL REFERENCES users (user_id) ON DELETE CASCADE,
    expires   TEXT NOT NULL,
    created   TEXT NOT NULL
);
