-- Governance: tool policies, richer usage rows and audit queries.

-- Admin rules checked before a tool call's approval: the first enabled rule
-- (lowest priority number, then oldest) whose glob matches the tool and whose
-- role is empty or the caller's decides allow / deny / ask.
CREATE TABLE tool_policies (
    policy_id    TEXT PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    tool_pattern TEXT NOT NULL,
    action       TEXT NOT NULL CHECK (action IN ('allow', 'deny', 'ask')),
    role         TEXT,
    priority     INTEGER NOT NULL DEFAULT 100,
    enabled      INTEGER NOT NULL DEFAULT 1,
    description  TEXT NOT NULL DEFAULT '',
    created_by   TEXT,
    created      TEXT NOT NULL,
    updated      TEXT NOT NULL
);
CREATE INDEX tool_policies_order ON tool_policies (priority, created);

-- Usage per model call: the alias asked, prompt-cache writes, latency and
-- what the call was for (turn, compaction, title, judge, tool, agent).
ALTER TABLE usage_events ADD COLUMN model_alias TEXT;
ALTER TABLE usage_events ADD COLUMN cache_creation_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_events ADD COLUMN latency_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_events ADD COLUMN purpose TEXT NOT NULL DEFAULT 'turn';
CREATE INDEX usage_events_user ON usage_events (user_id, timestamp);

-- The audit log is read newest first, filtered by action or user.
CREATE INDEX audit_log_action ON audit_log (action, id);
CREATE INDEX audit_log_user ON audit_log (user_id, id);
