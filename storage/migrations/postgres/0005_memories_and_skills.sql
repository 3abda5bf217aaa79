-- Memory types follow the wire contract (user, general, feedback, reference;
-- the old `project` type is `general`), and a memory may belong to a project.
ALTER TABLE structured_memories DROP CONSTRAINT structured_memories_type_check;
ALTER TABLE structured_memories DROP CONSTRAINT structured_memories_scope_check;
UPDATE structured_memories SET type = 'general' WHERE type = 'project';
ALTER TABLE structured_memories ADD CONSTRAINT structured_memories_type_check
    CHECK (type IN ('user', 'general', 'feedback', 'reference'));
ALTER TABLE structured_memories ADD CONSTRAINT structured_memories_scope_check
    CHECK (scope IN ('global', 'workstream', 'user', 'project'));
-- Newest first within a scope: the memory index reads the top of each visible scope.
CREATE INDEX structured_memories_scope ON structured_memories (scope, scope_id, updated);

-- Who saved a skill version.
ALTER TABLE prompt_templates ADD COLUMN created_by TEXT;
