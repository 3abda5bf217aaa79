-- MCP servers defined at run time (admin API, console). `definition` is the
-- `[mcp.servers.NAME]` entry as a JSON object. Whether a server is enabled, its
-- grant and its reload requests live in the `plugins` row of the same name,
-- as for every plugin. The table of 0001 was never written.
DROP TABLE mcp_servers;
CREATE TABLE mcp_servers (
    name       TEXT PRIMARY KEY,
    definition TEXT NOT NULL,
    created_by TEXT,
    created    TEXT NOT NULL,
    updated    TEXT NOT NULL
);
