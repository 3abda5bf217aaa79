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
//!
//! The conversation is the other large part, and for the same reason
//! [`ConversationBody`] writes it straight from the adapter's borrowed types
//! rather than from a `Value` copy of the history.

use crate::provider::{ProviderError, ToolDefinition};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;

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

/// A [`RequestBody`] and the conversation under its API's key (`messages`,
/// `input`), of the adapter's own serialisable type `C`.
#[derive(Debug)]
pub struct ConversationBody<T, C> {
    /// The small fields and the tools.
    pub request: RequestBody<T>,
    /// The conversation's key and the conversation.
    conversation: Option<(&'static str, C)>,
}

impl<T: Serialize, C: Serialize> ConversationBody<T, C> {
    /// A body of `request` without a conversation.
    pub fn new(request: RequestBody<T>) -> Self {
        Self {
            request,
            conversation: None,
        }
    }

    /// Sets the conversation under `key`, unless a field of that name is
    /// already set (an operator's setting wins, and a key is never written
    /// twice).
    pub fn with_conversation(mut self, key: &'static str, conversation: C) -> Self {
        if !self.request.fields.contains_key(key) {
            self.conversation = Some((key, conversation));
        }
        self
    }

    /// The conversation, if the body carries one.
    pub fn conversation(&self) -> Option<&C> {
        self.conversation.as_ref().map(|(_, c)| c)
    }

    /// Merges the operator's `extra` object over the body: its fields win,
    /// the tools and the conversation included.
    pub fn merge_extra(&mut self, extra: &str) -> Result<(), ProviderError> {
        self.request.merge_extra(extra)?;
        if let Some((key, _)) = &self.conversation
            && self.request.fields.contains_key(*key)
        {
            self.conversation = None;
        }
        Ok(())
    }

    /// The body's JSON text.
    pub fn to_json(&self) -> Result<String, ProviderError> {
        serde_json::to_string(self)
            .map_err(|e| ProviderError::BadRequest(format!("request body: {e}")))
    }
}

impl<T: Serialize, C: Serialize> Serialize for ConversationBody<T, C> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in &self.request.fields {
            map.serialize_entry(key, value)?;
        }
        if let Some((key, conversation)) = &self.conversation {
            map.serialize_entry(key, conversation)?;
        }
        if !self.request.tools.is_empty() {
            map.serialize_entry("tools", &self.request.tools)?;
        }
        map.end()
    }
}

/// One item of a stored list (a message's `provider_data`: items or blocks
/// the provider sent, kept to be sent back), as its stored text.
#[derive(Debug, Clone)]
pub struct StoredItem<'a> {
    /// The item's JSON text, to be written back as it is.
    pub raw: &'a RawValue,
    kind: Option<Cow<'a, str>>,
}

impl StoredItem<'_> {
    /// The item's `type`: `None` unless it is an object whose `type` is a
    /// string.
    pub fn kind(&self) -> Option<&str> {
        self.kind.as_deref()
    }
}

/// The `type` of a stored item.
#[derive(Deserialize)]
struct ItemHead<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
}

/// The items of a stored JSON list, each kept as its text rather than
/// parsed into a `Value` tree (replayed reasoning is most of a reasoning
/// model's request after the history); `None` if `text` is not a JSON list.
pub fn stored_items(text: &str) -> Option<Vec<StoredItem<'_>>> {
    let raws: Vec<&RawValue> = serde_json::from_str(text).ok()?;
    let items = raws
        .into_iter()
        .map(|raw| {
            // Only an object has a `type` (serde would also read a list).
            let kind = raw
                .get()
                .starts_with('{')
                .then(|| serde_json::from_str::<ItemHead>(raw.get()).ok())
                .flatten()
                .map(|head| head.kind);
            StoredItem { raw, kind }
        })
        .collect();
    Some(items)
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

    #[test]
    fn the_conversation_is_written_once_and_extra_may_replace_it() {
        let t = tool("search", "{}");
        let mut fields = Map::new();
        fields.insert("model".into(), json!("m"));
        let mut request = RequestBody::new(fields);
        request.tools.push(Entry {
            name: &t.name,
            parameters: tool_schema(&t).expect("schema"),
        });
        let body = ConversationBody::new(request).with_conversation("messages", vec!["hi"]);
        let text = body.to_json().expect("serialises");
        assert_eq!(
            text,
            r#"{"model":"m","messages":["hi"],"tools":[{"name":"search","parameters":{}}]}"#
        );
        assert_eq!(body.conversation(), Some(&vec!["hi"]));

        // A field already named like the conversation wins and is written once.
        let mut fields = Map::new();
        fields.insert("messages".into(), json!(["set"]));
        let body: ConversationBody<Entry, _> = ConversationBody::new(RequestBody::new(fields))
            .with_conversation("messages", vec!["hi"]);
        assert_eq!(
            body.to_json().expect("serialises"),
            r#"{"messages":["set"]}"#
        );
        assert!(body.conversation().is_none());

        // `extra` replaces it; an unrelated `extra` leaves it.
        let mut body: ConversationBody<Entry, _> =
            ConversationBody::new(RequestBody::new(Map::new()))
                .with_conversation("input", vec!["hi"]);
        body.merge_extra(r#"{"messages": []}"#).expect("an object");
        assert_eq!(
            body.to_json().expect("serialises"),
            r#"{"messages":[],"input":["hi"]}"#
        );
        body.merge_extra(r#"{"input": "mine"}"#).expect("an object");
        let text = body.to_json().expect("serialises");
        assert_eq!(text.matches("\"input\"").count(), 1, "{text}");
        assert_eq!(
            serde_json::from_str::<Value>(&text).expect("JSON")["input"],
            "mine"
        );
    }

    #[test]
    fn stored_items_keep_their_text_and_read_a_string_type_of_an_object() {
        let text = r#"[ {"type": "reasoning", "encrypted_content": "gAAA\"x\"", "summary": []},
            {"id": "no type"}, {"type": 1}, "reasoning", ["reasoning"], {"type": "t\u0065xt"},
            {"nested": {"type": "inner"}, "type": "outer"} ]"#;
        let items = stored_items(text).expect("a list");
        let kinds: Vec<Option<&str>> = items.iter().map(StoredItem::kind).collect();
        assert_eq!(
            kinds,
            [
                Some("reasoning"),
                None,
                None,
                None,
                None,
                Some("text"),
                Some("outer")
            ]
        );
        assert_eq!(
            items[0].raw.get(),
            r#"{"type": "reasoning", "encrypted_content": "gAAA\"x\"", "summary": []}"#
        );
        assert_eq!(items[3].raw.get(), r#""reasoning""#);
        // Each item, written back, is the JSON it was stored as.
        let back = serde_json::to_string(&items.iter().map(|i| i.raw).collect::<Vec<_>>())
            .expect("serialises");
        assert_eq!(
            serde_json::from_str::<Value>(&back).expect("JSON"),
            serde_json::from_str::<Value>(text).expect("JSON")
        );
        for not_a_list in ["", "{}", "\"[]\"", "[1,", "null"] {
            assert!(stored_items(not_a_list).is_none(), "{not_a_list:?}");
        }
        assert!(stored_items("[]").expect("a list").is_empty());
    }
}
