//! The `messages` list, written straight from the request: roles made to
//! alternate, a leading system prompt hoisted, stored native blocks
//! replayed as their stored text. Borrowed types rather than a `Value` tree,
//! so the history is not copied once more into the instance's memory before
//! the body is written (see [`turnstone_plugin_sdk::request_body`]).

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::value::RawValue;
use std::borrow::Cow;
use turnstone_plugin_sdk::provider::{
    CompletionRequest, ContentPart, Message, Role, text_cow, text_of,
};
use turnstone_plugin_sdk::request_body::{StoredItem, stored_items};

/// Block types the Messages API accepts back verbatim; anything else in a
/// stored native lane (e.g. another vendor's reasoning) is rebuilt instead.
const VALID_BLOCK_TYPES: &[&str] = &[
    "text",
    "thinking",
    "redacted_thinking",
    "tool_use",
    "server_tool_use",
    "web_search_tool_result",
    "tool_search_tool_result",
];

/// One block of an outgoing message: built from the request, or a stored
/// native block replayed as the API sent it.
#[derive(Serialize)]
#[serde(untagged)]
enum Item<'a> {
    Built(Block<'a>),
    Native(&'a RawValue),
}

/// A block built from the request.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: Cow<'a, str>,
    },
    Image {
        source: ImageSource<'a>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: ToolInput<'a>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: Content<'a>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

/// An image's inline base64 source.
#[derive(Serialize)]
struct ImageSource<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: &'a str,
    data: &'a str,
}

/// A call's arguments as the model wrote them when they are a JSON object,
/// else an empty object.
struct ToolInput<'a>(Option<&'a RawValue>);

impl<'a> ToolInput<'a> {
    fn of(arguments: &'a str) -> Self {
        // Checked by a full parse, freed at once: the raw check alone lets
        // through what the API would refuse (a lone surrogate, a number
        // beyond f64, nesting past 128), which would fail every later turn
        // of the conversation; those become `{}` as they always did.
        let is_object = matches!(
            serde_json::from_str::<serde_json::Value>(arguments),
            Ok(serde_json::Value::Object(_))
        );
        let raw = is_object
            .then(|| serde_json::from_str::<&RawValue>(arguments).ok())
            .flatten();
        Self(raw)
    }
}

impl Serialize for ToolInput<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Some(raw) => raw.serialize(serializer),
            None => serializer.serialize_map(Some(0))?.end(),
        }
    }
}

/// A message's content: a lone text as a string, or blocks.
#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<Item<'a>>),
}

/// One message of the `messages` list.
#[derive(Serialize)]
pub struct OutMessage<'a> {
    role: &'static str,
    content: Content<'a>,
}

fn text_block(text: Cow<'_, str>) -> Item<'_> {
    Item::Built(Block::Text { text })
}

fn blocks_of(parts: &[ContentPart]) -> Vec<Item<'_>> {
    parts
        .iter()
        .map(|p| match p {
            ContentPart::Text(t) => text_block(Cow::Borrowed(t)),
            ContentPart::Image(img) => Item::Built(Block::Image {
                source: ImageSource {
                    kind: "base64",
                    media_type: &img.media_type,
                    data: &img.data_base64,
                },
            }),
        })
        .collect()
}

/// One outgoing message while grouping.
struct Out<'a> {
    role: &'static str,
    blocks: Vec<Item<'a>>,
    /// A lone plain-text user/system message is sent as a string.
    plain: Option<Cow<'a, str>>,
}

fn push<'a>(
    out: &mut Vec<Out<'a>>,
    role: &'static str,
    blocks: Vec<Item<'a>>,
    plain: Option<Cow<'a, str>>,
) {
    if let Some(last) = out.last_mut()
        && last.role == role
        && role != "system"
    {
        // Roles must alternate: merge into the previous message.
        if let Some(text) = last.plain.take() {
            last.blocks = vec![text_block(text)];
        }
        last.blocks.extend(blocks);
        if let Some(text) = plain {
            last.blocks.push(text_block(text));
        }
        return;
    }
    out.push(Out {
        role,
        blocks,
        plain,
    });
}

/// The stored native blocks of `m`, if every one is an object of a type the
/// API takes back; each is replayed as its stored text rather than re-parsed.
fn native_blocks(m: &Message) -> Option<Vec<StoredItem<'_>>> {
    let blocks = stored_items(m.provider_data.as_deref()?)?;
    let valid = !blocks.is_empty()
        && blocks
            .iter()
            .all(|b| b.kind().is_some_and(|t| VALID_BLOCK_TYPES.contains(&t)));
    valid.then_some(blocks)
}

fn assistant_blocks(m: &Message, replay: bool) -> Vec<Item<'_>> {
    if let Some(blocks) = native_blocks(m) {
        if replay {
            return blocks.into_iter().map(|b| Item::Native(b.raw)).collect();
        }
        // Server-side tool blocks (tool search, web search) stay paired with
        // their results even without reasoning replay: a tool search's
        // result is what keeps the tools it loaded loaded. Thinking stays out.
        if blocks.iter().any(|b| b.kind() == Some("server_tool_use")) {
            return blocks
                .into_iter()
                .filter(|b| !matches!(b.kind(), Some("thinking" | "redacted_thinking")))
                .map(|b| Item::Native(b.raw))
                .collect();
        }
    }
    let mut blocks = Vec::new();
    let text = text_cow(&m.content);
    if !text.is_empty() {
        blocks.push(text_block(text));
    }
    for c in &m.tool_calls {
        blocks.push(Item::Built(Block::ToolUse {
            id: &c.id,
            name: &c.name,
            input: ToolInput::of(&c.arguments),
        }));
    }
    blocks
}

/// The `messages` list: roles alternating, a leading system prompt hoisted
/// to `system` (returned apart), written straight from the request.
pub(crate) fn conversation(
    req: &CompletionRequest,
    inline_system: bool,
    replay: bool,
) -> (Vec<String>, Vec<OutMessage<'_>>) {
    let mut system = Vec::new();
    let mut out: Vec<Out> = Vec::new();
    for m in &req.messages {
        match m.role {
            Role::System => {
                // A leading system prompt always goes to `system`; later ones stay
                // inline only for models that accept mid-conversation system turns.
                if inline_system && !out.is_empty() {
                    push(&mut out, "system", Vec::new(), Some(text_cow(&m.content)));
                } else {
                    system.push(text_of(&m.content));
                }
            }
            Role::User => match m.content.as_slice() {
                [ContentPart::Text(t)] => {
                    push(&mut out, "user", Vec::new(), Some(Cow::Borrowed(t)))
                }
                parts => push(&mut out, "user", blocks_of(parts), None),
            },
            Role::Assistant => {
                let blocks = assistant_blocks(m, replay);
                if !blocks.is_empty() {
                    push(&mut out, "assistant", blocks, None);
                }
            }
            Role::Tool => {
                // Images a tool returned ride in its result as image blocks.
                let content = if m.content.iter().any(|p| matches!(p, ContentPart::Image(_))) {
                    Content::Blocks(blocks_of(&m.content))
                } else {
                    Content::Text(text_cow(&m.content))
                };
                let block = Block::ToolResult {
                    tool_use_id: m.tool_call_id.as_deref().unwrap_or_default(),
                    content,
                    is_error: m.is_error,
                };
                push(&mut out, "user", vec![Item::Built(block)], None);
            }
        }
    }
    let messages = out
        .into_iter()
        .map(|o| OutMessage {
            role: o.role,
            content: match o.plain {
                Some(text) => Content::Text(text),
                None => Content::Blocks(o.blocks),
            },
        })
        .collect();
    (system, messages)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::models::lookup;
    use serde_json::{Value, json};
    use turnstone_plugin_sdk::provider::ToolCall;

    pub(crate) fn msg(role: Role, text: &str) -> Message {
        Message {
            role,
            content: vec![ContentPart::Text(text.into())],
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            is_error: false,
            reasoning: None,
            provider_data: None,
            source: None,
        }
    }

    pub(crate) fn req(model: &str, messages: Vec<Message>) -> CompletionRequest {
        CompletionRequest {
            provider: "anthropic".into(),
            base_url: String::new(),
            model: model.into(),
            messages,
            tools: Vec::new(),
            temperature: None,
            max_tokens: None,
            reasoning_effort: None,
            replay_reasoning: false,
            capabilities: None,
            extra: None,
            tool_search: false,
        }
    }

    fn ref_blocks_of(parts: &[ContentPart]) -> Vec<Value> {
        parts
            .iter()
            .map(|p| match p {
                ContentPart::Text(t) => json!({"type": "text", "text": t}),
                ContentPart::Image(img) => json!({
                    "type": "image",
                    "source": {"type": "base64", "media_type": img.media_type, "data": img.data_base64},
                }),
            })
            .collect()
    }

    // One outgoing message while grouping.
    struct RefOut {
        role: &'static str,
        blocks: Vec<Value>,
        // A lone plain-text user/system message is sent as a string.
        plain: Option<String>,
    }

    fn ref_push(
        out: &mut Vec<RefOut>,
        role: &'static str,
        blocks: Vec<Value>,
        plain: Option<String>,
    ) {
        if let Some(last) = out.last_mut()
            && last.role == role
            && role != "system"
        {
            // Roles must alternate: merge into the previous message.
            if let Some(text) = last.plain.take() {
                last.blocks = vec![json!({"type": "text", "text": text})];
            }
            last.blocks.extend(blocks);
            if let Some(text) = plain {
                last.blocks.push(json!({"type": "text", "text": text}));
            }
            return;
        }
        out.push(RefOut {
            role,
            blocks,
            plain,
        });
    }

    fn ref_native_blocks(m: &Message) -> Option<Vec<Value>> {
        let blocks: Vec<Value> = serde_json::from_str(m.provider_data.as_deref()?).ok()?;
        let valid = !blocks.is_empty()
            && blocks.iter().all(|b| {
                b.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| VALID_BLOCK_TYPES.contains(&t))
            });
        valid.then_some(blocks)
    }

    fn ref_assistant_blocks(m: &Message, replay: bool) -> Vec<Value> {
        if let Some(blocks) = ref_native_blocks(m) {
            if replay {
                return blocks;
            }
            // Server-side tool blocks (tool search, web search) stay paired with
            // their results even without reasoning replay: a tool search's
            // result is what keeps the tools it loaded loaded. Thinking stays out.
            if blocks.iter().any(|b| b["type"] == "server_tool_use") {
                return blocks
                    .into_iter()
                    .filter(|b| {
                        !matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking"))
                    })
                    .collect();
            }
        }
        let mut blocks = Vec::new();
        let text = text_of(&m.content);
        if !text.is_empty() {
            blocks.push(json!({"type": "text", "text": text}));
        }
        for c in &m.tool_calls {
            let input: Value = serde_json::from_str(&c.arguments)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({}));
            blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}));
        }
        blocks
    }

    /// The conversation as it was built before [`conversation`]: a `Value`
    /// tree per message, the reference its output is held equal to.
    fn reference_conversation(
        req: &CompletionRequest,
        inline_system: bool,
        replay: bool,
    ) -> (Vec<String>, Value) {
        let mut system = Vec::new();
        let mut out: Vec<RefOut> = Vec::new();
        for m in &req.messages {
            match m.role {
                Role::System => {
                    let text = text_of(&m.content);
                    if inline_system && !out.is_empty() {
                        ref_push(&mut out, "system", Vec::new(), Some(text));
                    } else {
                        system.push(text);
                    }
                }
                Role::User => {
                    let plain = match m.content.as_slice() {
                        [ContentPart::Text(t)] => Some(t.clone()),
                        _ => None,
                    };
                    let blocks = if plain.is_some() {
                        Vec::new()
                    } else {
                        ref_blocks_of(&m.content)
                    };
                    ref_push(&mut out, "user", blocks, plain);
                }
                Role::Assistant => {
                    let blocks = ref_assistant_blocks(m, replay);
                    if !blocks.is_empty() {
                        ref_push(&mut out, "assistant", blocks, None);
                    }
                }
                Role::Tool => {
                    let content = if m.content.iter().any(|p| matches!(p, ContentPart::Image(_))) {
                        Value::Array(ref_blocks_of(&m.content))
                    } else {
                        json!(text_of(&m.content))
                    };
                    let mut block = json!({
                        "type": "tool_result",
                        "tool_use_id": m.tool_call_id.clone().unwrap_or_default(),
                        "content": content,
                    });
                    if m.is_error {
                        block["is_error"] = json!(true);
                    }
                    ref_push(&mut out, "user", vec![block], None);
                }
            }
        }
        let messages: Vec<Value> = out
            .into_iter()
            .map(|o| match o.plain {
                Some(text) => json!({"role": o.role, "content": text}),
                None => json!({"role": o.role, "content": o.blocks}),
            })
            .collect();
        (system, Value::Array(messages))
    }

    fn call(id: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: arguments.into(),
        }
    }

    fn image(data: &str) -> ContentPart {
        ContentPart::Image(turnstone_plugin_sdk::provider::ImageData {
            media_type: "image/png".into(),
            data_base64: data.into(),
        })
    }

    fn native(text: &str, blocks: &str) -> Message {
        let mut m = msg(Role::Assistant, text);
        m.provider_data = Some(blocks.into());
        m
    }

    fn tool_result(id: Option<&str>, parts: Vec<ContentPart>, is_error: bool) -> Message {
        let mut m = msg(Role::Tool, "");
        m.content = parts;
        m.tool_call_id = id.map(Into::into);
        m.is_error = is_error;
        m
    }

    /// Every shape the conversation builder meets, in an order that makes
    /// each prefix exercise merging, hoisting and replay differently.
    fn corpus() -> Vec<Message> {
        let thinking = r#"{"type":"thinking","thinking":"hmm \"q\"","signature":"c2ln"}"#;
        let mut calls = msg(Role::Assistant, "calling\n");
        calls.tool_calls = vec![
            call("c1", r#"{"path":"a \"b\".rs"}"#),
            call("c2", " {\"n\": [1, 2.50, 1e3], \"u\": \"\\u00e9\"} "),
            call("c3", "[1]"),
            call("c4", "not json"),
            call("c5", ""),
            call("c7", r#"{"s": "\ud800"}"#),
            call("c8", r#"{"n": 1e400}"#),
            call(
                "c9",
                &format!("{{\"deep\": {}{}}}", "[".repeat(200), "]".repeat(200)),
            ),
        ];
        let mut replayed = native(
            "answer",
            &format!(
                r#"[{thinking}, {{"type":"text","text":"answer"}}, {{"type": "tool_use", "id": "c6", "name": "read_file", "input": {{"path": "x"}}}}]"#
            ),
        );
        replayed.tool_calls = vec![call("c6", r#"{"path":"x"}"#)];
        let mut multi = msg(Role::User, "first part, ");
        multi.content.push(ContentPart::Text("second part".into()));
        let mut with_image = msg(Role::User, "what is this?");
        with_image.content.push(image("iVBOR"));
        vec![
            msg(Role::System, "be brief"),
            msg(Role::System, "and kind"),
            msg(
                Role::User,
                "plain \"quoted\" \\ text\n\t\u{1} ünïcode \u{2028} 🦀",
            ),
            msg(Role::User, "a second user message"),
            multi,
            with_image,
            calls,
            tool_result(Some("c1"), vec![ContentPart::Text("out".into())], false),
            tool_result(None, vec![ContentPart::Text("failed".into())], true),
            tool_result(
                Some("c3"),
                vec![
                    ContentPart::Text("Image a.png".into()),
                    image("AAAA"),
                    ContentPart::Text("and b.png".into()),
                    image("BBBB"),
                ],
                false,
            ),
            tool_result(Some("c4"), vec![], false),
            msg(Role::User, "after the results"),
            msg(Role::System, "a later system prompt"),
            replayed,
            tool_result(Some("c6"), vec![ContentPart::Text("x".into())], false),
            native(
                "",
                &format!(
                    r#"[{thinking}, {{"type":"server_tool_use","id":"srvtoolu_1","name":"tool_search_tool_bm25","input":{{"query":"gh"}}}}, {{"type":"tool_search_tool_result","tool_use_id":"srvtoolu_1","content":{{"type":"tool_search_tool_search_result","tool_references":[]}}}}]"#
                ),
            ),
            native("other vendor", r#"[{"type":"reasoning","text":"r"}]"#),
            native("empty lane", "[]"),
            native("not a list", r#"{"type":"text"}"#),
            native("not json", "[{"),
            native("a bare string", r#"["text"]"#),
            native("a list for a block", r#"[["thinking"]]"#),
            native("a number type", r#"[{"type": 1}]"#),
            native("no type", r#"[{"text": "t"}]"#),
            native(
                "escaped",
                r#"[{"type": "t\u0065xt", "text": "escaped type"}]"#,
            ),
            native("", r#"[{"type":"redacted_thinking","data":"ZW5j"}]"#),
            msg(Role::Assistant, ""),
            msg(Role::Assistant, "plain reply"),
            msg(Role::Assistant, "merged into the last"),
            msg(Role::User, "done?"),
            msg(Role::System, "end"),
        ]
    }

    #[test]
    fn the_conversation_serialises_as_the_value_tree_did() {
        let messages = corpus();
        let mut checked = 0;
        for model in [
            "claude-opus-4-8",
            "claude-sonnet-4-5",
            "claude-3-5-sonnet-latest",
        ] {
            for replay_reasoning in [false, true] {
                for n in 0..=messages.len() {
                    let mut r = req(model, messages[..n].to_vec());
                    r.replay_reasoning = replay_reasoning;
                    let profile = lookup(model, "anthropic", None);
                    let replay = replay_reasoning && profile.reasoning_replay;
                    let (system, expected) =
                        reference_conversation(&r, profile.inline_system, replay);
                    let (got_system, got) = conversation(&r, profile.inline_system, replay);
                    let text = serde_json::to_string(&got).expect("serialises");
                    let got: Value = serde_json::from_str(&text).expect("JSON");
                    let case = format!("{model}, replay {replay_reasoning}, {n} messages");
                    assert_eq!(got, expected, "{case}");
                    assert_eq!(got_system, system, "{case}");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 3 * 2 * (messages.len() + 1));
        // The corpus reaches the shapes it is meant to: the full conversation
        // replays native blocks, merges roles and keeps a system turn inline.
        let mut r = req("claude-opus-4-8", messages);
        r.replay_reasoning = true;
        let profile = lookup("claude-opus-4-8", "anthropic", None);
        let (_, got) = conversation(&r, profile.inline_system, true);
        let text = serde_json::to_string(&got).expect("serialises");
        assert!(
            text.contains(r#"{"type":"thinking","thinking":"hmm \"q\"","signature":"c2ln"}"#),
            "{text}"
        );
        assert!(
            text.contains(r#"{"role":"system","content":"a later system prompt"}"#),
            "{text}"
        );
        assert!(text.contains(r#""input":{}"#), "{text}");
    }
}
