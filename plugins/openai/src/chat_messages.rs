//! The Chat Completions `messages` array, serialised straight from the
//! request.
//!
//! A long conversation is most of a request: every message, every tool
//! result, every image's base64. Building it as a `serde_json::Value` tree
//! first copied all of it once more (and each image twice, through its data
//! URL) into the instance's memory before the body's text was written, and a
//! component's linear memory never shrinks, so that copy stayed as the
//! instance's high-water mark for the whole stream. These types borrow
//! from the request; only text that must be joined (a message of several
//! text parts) or written fresh (the line naming the call an image came
//! from) is owned.

use serde::ser::{Serialize, Serializer};
use std::borrow::Cow;
use turnstone_plugin_sdk::provider::{
    ContentPart, ImageData, Message, Role, ToolCall, text_cow as text,
};

/// One entry of `messages`.
#[derive(Debug, serde::Serialize)]
pub struct ChatMessage<'a> {
    role: &'static str,
    /// Present on tool results only ("" when the host sent none).
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    content: Content<'a>,
    /// An assistant message's calls, in the API's shape.
    #[serde(skip_serializing_if = "<[_]>::is_empty", serialize_with = "calls")]
    tool_calls: &'a [ToolCall],
}

/// `[{"id": …, "type": "function", "function": {"name": …, "arguments": …}}]`.
fn calls<S: Serializer>(calls: &&[ToolCall], s: S) -> Result<S::Ok, S::Error> {
    #[derive(serde::Serialize)]
    struct Call<'a> {
        id: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
        function: Function<'a>,
    }
    #[derive(serde::Serialize)]
    struct Function<'a> {
        name: &'a str,
        arguments: &'a str,
    }
    s.collect_seq(calls.iter().map(|c| Call {
        id: &c.id,
        kind: "function",
        function: Function {
            name: &c.name,
            arguments: &c.arguments,
        },
    }))
}

/// A message's `content`: a string, or a list of parts.
#[derive(Debug)]
enum Content<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Part<'a>>),
}

impl Serialize for Content<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Content::Text(t) => s.serialize_str(t),
            Content::Parts(p) => p.serialize(s),
        }
    }
}

/// One part of a list `content`.
#[derive(Debug, serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { text: Cow<'a, str> },
    ImageUrl { image_url: ImageUrl<'a> },
}

/// `{"url": "data:<type>;base64,<data>"}`, the URL written as it is
/// serialised rather than formatted into a string of its own first.
#[derive(Debug)]
struct ImageUrl<'a>(&'a ImageData);

/// An image as a `data:` URL string, written as it is serialised.
#[derive(Debug)]
pub(crate) struct DataUrl<'a>(pub(crate) &'a ImageData);

impl Serialize for DataUrl<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!(
            "data:{};base64,{}",
            self.0.media_type, self.0.data_base64
        ))
    }
}

impl Serialize for ImageUrl<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("ImageUrl", 1)?;
        st.serialize_field("url", &DataUrl(self.0))?;
        st.end()
    }
}

/// A user message's content: its text, or its parts when it has images.
fn user_content(parts: &[ContentPart]) -> Content<'_> {
    if parts.iter().all(|p| matches!(p, ContentPart::Text(_))) {
        return Content::Text(text(parts));
    }
    Content::Parts(
        parts
            .iter()
            .map(|p| match p {
                ContentPart::Text(t) => Part::Text {
                    text: Cow::Borrowed(t),
                },
                ContentPart::Image(img) => Part::ImageUrl {
                    image_url: ImageUrl(img),
                },
            })
            .collect(),
    )
}

fn message(m: &Message) -> ChatMessage<'_> {
    let (role, content) = match m.role {
        Role::System => ("system", Content::Text(text(&m.content))),
        Role::User => ("user", user_content(&m.content)),
        Role::Tool => ("tool", Content::Text(text(&m.content))),
        Role::Assistant => ("assistant", Content::Text(text(&m.content))),
    };
    ChatMessage {
        role,
        tool_call_id: (m.role == Role::Tool).then(|| m.tool_call_id.as_deref().unwrap_or_default()),
        content,
        tool_calls: if m.role == Role::Assistant {
            &m.tool_calls
        } else {
            &[]
        },
    }
}

/// The `messages` array. Chat Completions takes images only in user
/// messages, so images a tool returned follow its batch of results as one
/// user message that names the call each came from.
pub fn chat_messages(messages: &[Message]) -> Vec<ChatMessage<'_>> {
    let mut out = Vec::with_capacity(messages.len());
    let mut pending: Vec<Part<'_>> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        out.push(message(m));
        if m.role != Role::Tool {
            continue;
        }
        let images: Vec<Part<'_>> = m
            .content
            .iter()
            .filter_map(|p| match p {
                ContentPart::Image(img) => Some(Part::ImageUrl {
                    image_url: ImageUrl(img),
                }),
                ContentPart::Text(_) => None,
            })
            .collect();
        if !images.is_empty() {
            pending.push(Part::Text {
                text: Cow::Owned(format!(
                    "Image{} returned by tool call {}:",
                    if images.len() == 1 { "" } else { "s" },
                    m.tool_call_id.as_deref().unwrap_or("?")
                )),
            });
            pending.extend(images);
        }
        let batch_ends = messages.get(i + 1).is_none_or(|n| n.role != Role::Tool);
        if batch_ends && !pending.is_empty() {
            out.push(ChatMessage {
                role: "user",
                tool_call_id: None,
                content: Content::Parts(std::mem::take(&mut pending)),
                tool_calls: &[],
            });
        }
    }
    out
}
