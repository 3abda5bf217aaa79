-- Memory types follow the wire contract (user, general, feedback, reference;
-- the old `project` type is `general`), and a memory may belong to a project.
-- SQLite cannot change a CHECK constraint: the table is rebuilt.
CREATE TABLE structured_memories_new (
    memory_id     TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    description   TEXT NOT NULL DEFAULT '',
    type          TEXT NOT NULL CHECK (type IN ('user', 'general', 'feedback', 'reference')),
    scope         TEXT NOT NULL CHECK (scope IN ('global', 'workstream', 'user', 'project')),
    scope_id      TEXT NOT NULL DEFAULT '',
    content       TEXT NOT NULL,
    created       TEXT NOT NULL,
    updated       TEXT NOT NULL,
    last_accessed TEXT,
    access_count  INTEGER NOT NULL DEFAULT 0,
    UNIQUE (name, scope, scope_id)
);
INSERT INTO structured_memories_new
SELECT memory_id, name, description, CASE type WHEN 'project' THEN 'general' ELSE type END,
       scope, scope_id, content, created, updated, last_accessed, access_count
FROM structured_memories;
DROP TABLE structured_memories;
ALTER TABLE structured_memories_new RENAME TO structured_memories;
-- Newest first within a scope: the memory index reads the top of each visible scope.
CREATE INDEX structured_memories_scope ON structured_memories (scope, scope_id, updated);

-- Who saved a skill version.
ALTER TABLE prompt_templates ADD COLUMN created_by TEXT;
