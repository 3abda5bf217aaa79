//! One tool of an MCP server, as the session offers it to the model.

use rmcp::model::Tool;
use std::sync::Arc;

/// One tool of a server.
#[derive(Debug, Clone)]
pub struct McpTool {
    /// `mcp__{server}__{tool}`.
    pub prefixed: String,
    /// The server's own name for it.
    pub name: String,
    /// Description.
    pub description: String,
    /// The input JSON schema as JSON text. Every model request offers the
    /// tool with this text, so it is written once when the server lists its
    /// tools, and clones share it.
    pub schema_text: Arc<str>,
    /// The description as every model request offers it (`[MCP: {server}]`
    /// before it), made once and shared by the requests like the schema.
    pub offered_description: Arc<str>,
}

impl McpTool {
    /// The tool `t` as server `server` listed it.
    pub fn listed(server: &str, t: Tool) -> Self {
        // A map of JSON values always serialises; the fallback only keeps
        // the type total.
        let schema_text = serde_json::to_string(&*t.input_schema)
            .unwrap_or_else(|_| String::from("{\"type\":\"object\"}"));
        let description = t.description.map(|d| d.to_string()).unwrap_or_default();
        Self {
            prefixed: format!("mcp__{server}__{}", t.name),
            name: t.name.to_string(),
            offered_description: format!("[MCP: {server}] {description}").into(),
            description,
            schema_text: schema_text.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_listed_tool_carries_its_schema_as_the_same_json_text() {
        let schema = json!({
            "type": "object",
            "properties": {"path": {"type": "string", "description": "a \"quoted\" path"}},
            "required": ["path"],
        });
        let serde_json::Value::Object(map) = schema.clone() else {
            unreachable!("an object literal");
        };
        let tool = McpTool::listed("fs", Tool::new("read_file", "Reads a file.", map));
        assert_eq!(tool.prefixed, "mcp__fs__read_file");
        assert_eq!(tool.name, "read_file");
        assert_eq!(tool.description, "Reads a file.");
        assert_eq!(&*tool.offered_description, "[MCP: fs] Reads a file.");
        // Clones (one per request) share the offered text.
        let again = tool.clone();
        assert!(Arc::ptr_eq(
            &tool.offered_description,
            &again.offered_description
        ));
        assert!(Arc::ptr_eq(&tool.schema_text, &again.schema_text));
        // The same text the schema's own serialisation gives.
        assert_eq!(&*tool.schema_text, schema.to_string());
        let back: serde_json::Value =
            serde_json::from_str(&tool.schema_text).expect("the text is JSON");
        assert_eq!(back, schema);
        // Clones (one per model request) share the text.
        let again = tool.clone();
        assert!(Arc::ptr_eq(&tool.schema_text, &again.schema_text));
    }
}
