-- Turnstone schema v1 (SQLite). Timestamps are UTC RFC 3339 strings with
-- millisecond precision ("2026-11-30T03:15:50.123Z"), which sort as text.

CREATE TABLE workstreams (
    ws_id         TEXT PRIMARY KEY,
    node_id       TEXT,
    user_id       TEXT,
    alias         TEXT UNIQUE,
    title         TEXT,
    name          TEXT NOT NULL DEFAULT '',
    state         TEXT NOT NULL,
    kind          TEXT NOT NULL DEFAULT 'interactive',
    parent_ws_id  TEXT,
    project_id    TEXT,
    persona       TEXT,
    skill_id      TEXT,
    skill_version INTEGER,
    incarnation   TEXT,            -- private create/fork token; never returned by reads
    created       TEXT NOT NULL,
    updated       TEXT NOT NULL
);
CREATE INDEX workstreams_state_updated ON workstreams (state, updated);
CREATE INDEX workstreams_user ON workstreams (user_id);
CREATE INDEX workstreams_parent ON workstreams (parent_ws_id);

CREATE TABLE conversations (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    ws_id         TEXT NOT NULL REFERENCES workstreams (ws_id) ON DELETE CASCADE,
    timestamp     TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'system')),
    content       TEXT,
    tool_name     TEXT,
    tool_call_id  TEXT,
    tool_calls    TEXT,
    provider_data TEXT,
    source        TEXT,
    event_id      INTEGER,
    is_error      INTEGER NOT NULL DEFAULT 0,
    attachments   TEXT,
    meta          TEXT
);
CREATE INDEX conversations_ws ON conversations (ws_id, id);

CREATE VIRTUAL TABLE conversations_fts USING fts5 (
    content, content = 'conversations', content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 0'
);
CREATE TRIGGER conversations_fts_insert AFTER INSERT ON conversations BEGIN
    INSERT INTO conversations_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER conversations_fts_delete AFTER DELETE ON conversations BEGIN
    INSERT INTO conversations_fts (conversations_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER conversations_fts_update AFTER UPDATE OF content ON conversations BEGIN
    INSERT INTO conversations_fts (conversations_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO conversations_fts (rowid, content) VALUES (new.id, new.content);
END;

CREATE TABLE workstream_config (
    ws_id TEXT NOT NULL REFERENCES workstreams (ws_id) ON DELETE CASCADE,
    key   TEXT NOT NULL,
    value TEXT,
    PRIMARY KEY (ws_id, key)
);

CREATE TABLE structured_memories (
    memory_id     TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    description   TEXT NOT NULL DEFAULT '',
    type          TEXT NOT NULL CHECK (type IN ('user', 'project', 'feedback', 'reference')),
    scope         TEXT NOT NULL CHECK (scope IN ('global', 'workstream', 'user')),
    scope_id      TEXT NOT NULL DEFAULT '',
    content       TEXT NOT NULL,
    created       TEXT NOT NULL,
    updated       TEXT NOT NULL,
    last_accessed TEXT,
    access_count  INTEGER NOT NULL DEFAULT 0,
    UNIQUE (name, scope, scope_id)
);

CREATE TABLE users (
    user_id       TEXT PRIMARY KEY,
    username      TEXT NOT NULL UNIQUE,
    display_name  TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    role          TEXT NOT NULL DEFAULT 'viewer',
    created       TEXT NOT NULL
);

CREATE TABLE api_tokens (
    token_id     TEXT PRIMARY KEY,
    token_hash   TEXT NOT NULL UNIQUE,
    token_prefix TEXT NOT NULL,
    user_id      TEXT NOT NULL REFERENCES users (user_id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    scopes       TEXT NOT NULL,
    created      TEXT NOT NULL,
    expires      TEXT,
    last_used    TEXT
);
CREATE INDEX api_tokens_user ON api_tokens (user_id);

CREATE TABLE channel_users (
    channel_type    TEXT NOT NULL,
    channel_user_id TEXT NOT NULL,
    user_id         TEXT NOT NULL REFERENCES users (user_id) ON DELETE CASCADE,
    created         TEXT NOT NULL,
    PRIMARY KEY (channel_type, channel_user_id)
);

CREATE TABLE plugins (
    name       TEXT PRIMARY KEY,
    version    TEXT NOT NULL,
    kind       TEXT NOT NULL,
    enabled    INTEGER NOT NULL DEFAULT 1,
    granted    TEXT,                -- JSON capabilities; NULL = default for its origin
    config     TEXT NOT NULL DEFAULT '{}',
    state      TEXT NOT NULL DEFAULT 'unknown',
    last_error TEXT,
    updated    TEXT NOT NULL
);

CREATE TABLE model_definitions (
    alias            TEXT PRIMARY KEY,
    provider         TEXT NOT NULL,
    base_url         TEXT,
    model            TEXT NOT NULL,
    api_key_ref      TEXT,
    context_window   INTEGER,
    temperature      REAL,
    max_tokens       INTEGER,
    reasoning_effort TEXT,
    max_concurrency  INTEGER NOT NULL DEFAULT 0,
    capabilities     TEXT,
    enabled          INTEGER NOT NULL DEFAULT 1,
    created          TEXT NOT NULL,
    updated          TEXT NOT NULL
);

CREATE TABLE mcp_servers (
    name      TEXT PRIMARY KEY,
    transport TEXT NOT NULL,
    command   TEXT,
    args      TEXT,
    url       TEXT,
    env       TEXT,
    enabled   INTEGER NOT NULL DEFAULT 1,
    created   TEXT NOT NULL,
    updated   TEXT NOT NULL
);

CREATE TABLE prompt_templates (
    template_id TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    version     INTEGER NOT NULL,
    kind        TEXT NOT NULL DEFAULT 'skill',
    description TEXT NOT NULL DEFAULT '',
    content     TEXT NOT NULL,
    created     TEXT NOT NULL,
    UNIQUE (name, version)
);

CREATE TABLE watches (
    watch_id      TEXT PRIMARY KEY,
    ws_id         TEXT NOT NULL REFERENCES workstreams (ws_id) ON DELETE CASCADE,
    command       TEXT NOT NULL,
    interval_secs INTEGER NOT NULL,
    condition     TEXT,
    max_polls     INTEGER,
    poll_count    INTEGER NOT NULL DEFAULT 0,
    last_output   TEXT,
    state         TEXT NOT NULL,
    created       TEXT NOT NULL,
    updated       TEXT NOT NULL
);

CREATE TABLE usage_events (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    timestamp         TEXT NOT NULL,
    user_id           TEXT,
    ws_id             TEXT,
    model             TEXT,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens     INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens  INTEGER NOT NULL DEFAULT 0,
    tool_calls        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX usage_events_ts ON usage_events (timestamp);

CREATE TABLE audit_log (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    timestamp TEXT NOT NULL,
    user_id   TEXT,
    action    TEXT NOT NULL,
    target    TEXT,
    detail    TEXT,
    ip        TEXT
);
CREATE INDEX audit_log_ts ON audit_log (timestamp);

CREATE TABLE services (
    service_id     TEXT PRIMARY KEY,
    kind           TEXT NOT NULL,
    node_id        TEXT NOT NULL,
    url            TEXT,
    version        TEXT,
    started        TEXT NOT NULL,
    last_heartbeat TEXT NOT NULL,
    meta           TEXT
);
