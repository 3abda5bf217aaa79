//! Request bodies for provider adapters: the small fields as a JSON map and
//! the tool list beside them, each tool's parameter schema kept as the text
//! the host sent.
//!
//! The schemas are most of a turn's request (every granted tool's, each
//! turn), and a component instance keeps its heap's high-water mark resident
//! until the call ends: parsing each schema into a `serde_json::Value` tree
//! and writing it out again cost every streaming call a few times the
//! schemas' size in touched pages. [`tool_schema`] only checks that a schema
//! is JSON, and the body copies it through as it is.

use crate::provider::{ProviderError, ToolDefinition};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// A request body whose tool entries are of the adapter's own type `T`.
#[derive(Debug, Serialize)]
pub struct RequestBody<T> {
    /// Every field but the tools.
    #[serde(flatten)]
    pub fields: Map<String, Value>,
    /// The tools, written last; left out when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<T>,
}

impl<T: Serialize> RequestBody<T> {
    /// A body of `fields` without tools.
    pub fn new(fields: Map<String, Value>) -> Self {
        Self {
            fields,
            tools: Vec::new(),
        }
    }

    /// Merges the operator's `extra` JSON object into the body: its fields
    /// win, and its own `tools` replaces the granted ones.
    pub fn merge_extra(&mut self, extra: &str) -> Result<(), ProviderError> {
        match serde_json::from_str::<Value>(extra) {
            Ok(Value::Object(m)) => {
                if m.contains_key("tools") {
                    self.tools.clear();
                }
                self.fields.extend(m);
                Ok(())
            }
            _ => Err(ProviderError::BadRequest(
                "extra must be a JSON object".into(),
            )),
        }
    }

    /// The body's JSON text.
    pub fn to_json(&self) -> Result<String, ProviderError> {
        serde_json::to_string(self)
            .map_err(|e| ProviderError::BadRequest(format!("request body: {e}")))
    }
}

/// `tool`'s parameter schema as sent by the host, checked to be JSON.
pub fn tool_schema(tool: &ToolDefinition) -> Result<&RawValue, ProviderError> {
    serde_json::from_str::<&RawValue>(&tool.parameters).map_err(|e| {
        ProviderError::BadRequest(format!("tool {} parameters are not JSON: {e}", tool.name))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Serialize)]
    struct Entry<'a> {
        name: &'a str,
        parameters: &'a RawValue,
    }

    fn tool(name: &str, parameters: &str) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: String::new(),
            parameters: parameters.into(),
            defer_loading: false,
        }
    }

    #[test]
    fn schemas_pass_through_as_sent_and_bad_ones_are_named() {
        let schema = r#"{"type":"object","properties":{"path":{"type":"string","description":"a \"quoted\" path"}},"required":["path"]}"#;
        let t = tool("read_file", schema);
        let mut fields = Map::new();
        fields.insert("model".into(), json!("m"));
        let mut body = RequestBody::new(fields);
        body.tools.push(Entry {
            name: &t.name,
            parameters: tool_schema(&t).expect("valid schema"),
        });
        let text = body.to_json().expect("serialises");
        assert!(text.contains(schema), "{text}");
        let v: Value = serde_json::from_str(&text).expect("the body is JSON");
        assert_eq!(v["model"], "m");
        assert_eq!(
            v["tools"][0]["parameters"]["properties"]["path"]["description"],
            "a \"quoted\" path"
        );

        let broken = tool("bad_tool", r#"{"type": "object""#);
        match tool_schema(&broken) {
            Err(ProviderError::BadRequest(m)) => {
                assert!(
                    m.starts_with("tool bad_tool parameters are not JSON"),
                    "{m}"
                )
            }
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("a truncated schema was accepted"),
        }
    }

    #[test]
    fn extra_fields_win_and_its_tools_replace_the_granted_ones() {
        let t = tool("search", "{}");
        let mut body = RequestBody::new(Map::new());
        assert_eq!(
            body.to_json().expect("serialises"),
            "{}",
            "no tools, no key"
        );
        body.fields.insert("max_tokens".into(), json!(10));
        body.tools.push(Entry {
            name: &t.name,
            parameters: tool_schema(&t).expect("schema"),
        });
        body.merge_extra(r#"{"max_tokens": 20, "top_p": 0.5}"#)
            .expect("an object");
        let v: Value = serde_json::from_str(&body.to_json().expect("serialises")).expect("JSON");
        assert_eq!(
            v,
            json!({"max_tokens": 20, "top_p": 0.5, "tools": [{"name": "search", "parameters": {}}]})
        );
        body.merge_extra(r#"{"tools": [{"name": "own"}]}"#)
            .expect("an object");
        let v: Value = serde_json::from_str(&body.to_json().expect("serialises")).expect("JSON");
        assert_eq!(v["tools"], json!([{"name": "own"}]));
        assert!(matches!(
            body.merge_extra("[1]"),
            Err(ProviderError::BadRequest(m)) if m == "extra must be a JSON object"
        ));
    }
}
