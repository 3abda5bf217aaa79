-- What open_preview showed in a workstream's preview pane, content-addressed
-- per workstream (the same bytes opened twice are one row), gone with it.
CREATE TABLE previews (
    ws_id       TEXT NOT NULL REFERENCES workstreams (ws_id) ON DELETE CASCADE,
    preview_id  TEXT NOT NULL,
    kind        TEXT NOT NULL,
    title       TEXT NOT NULL,
    media_type  TEXT NOT NULL,
    size_bytes  INTEGER NOT NULL,
    content     BLOB NOT NULL,
    call_id     TEXT,
    created     TEXT NOT NULL,
    PRIMARY KEY (ws_id, preview_id)
);
