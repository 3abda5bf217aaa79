-- Uploaded files waiting to be sent with a message (then marked consumed).
CREATE TABLE attachments (
    attachment_id TEXT PRIMARY KEY,
    ws_id         TEXT NOT NULL REFERENCES workstreams (ws_id) ON DELETE CASCADE,
    user_id       TEXT,
    filename      TEXT NOT NULL,
    mime_type     TEXT NOT NULL,
    kind          TEXT NOT NULL,
    size_bytes    BIGINT NOT NULL,
    content       BYTEA NOT NULL,
    created       TEXT NOT NULL,
    consumed      TEXT
);
CREATE INDEX attachments_ws ON attachments (ws_id, created);
