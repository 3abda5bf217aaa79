//! The Responses API `input` list, serialised straight from the request
//! (as [`crate::chat_messages`] does for Chat Completions, and for the same
//! reason: no second copy of a long conversation in the instance's memory).

use crate::chat_messages::DataUrl;
use serde::Serialize;
use serde::ser::Serializer;
use serde_json::value::RawValue;
use std::borrow::Cow;
use turnstone_plugin_sdk::provider::{ContentPart, text_cow as text};

/// One entry of `input`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum InputItem<'a> {
    /// A message, call or call output built from the request.
    Built(Item<'a>),
    /// An output item of an earlier response, replayed as it was stored.
    Replayed(&'a RawValue),
}

/// The entries this lane writes.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Item<'a> {
    /// A user or assistant message.
    Message {
        /// `user` or `assistant`.
        role: &'static str,
        /// Its text, or its parts when it has images.
        content: Output<'a>,
    },
    /// A function call the model made.
    FunctionCall {
        /// The call's id.
        call_id: &'a str,
        /// The function's name.
        name: &'a str,
        /// Its arguments, as the model wrote them.
        arguments: &'a str,
    },
    /// A tool's result.
    FunctionCallOutput {
        /// The call it answers ("" when the host sent none).
        call_id: &'a str,
        /// Its text, or its parts when it returned images.
        output: Output<'a>,
    },
}

/// Text alone as a string; with images, `input_text` / `input_image` parts
/// (the shape both a user message and a `function_call_output` take).
#[derive(Debug)]
pub enum Output<'a> {
    /// All text, joined.
    Text(Cow<'a, str>),
    /// Text and images, in order.
    Parts(&'a [ContentPart]),
}

impl<'a> Output<'a> {
    /// The content of `parts`.
    pub fn of(parts: &'a [ContentPart]) -> Self {
        if parts.iter().all(|p| matches!(p, ContentPart::Text(_))) {
            Output::Text(text(parts))
        } else {
            Output::Parts(parts)
        }
    }
}

impl Serialize for Output<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(tag = "type", rename_all = "snake_case")]
        enum Part<'a> {
            InputText { text: &'a str },
            InputImage { image_url: DataUrl<'a> },
        }
        match self {
            Output::Text(t) => s.serialize_str(t),
            Output::Parts(parts) => s.collect_seq(parts.iter().map(|p| match p {
                ContentPart::Text(t) => Part::InputText { text: t },
                ContentPart::Image(img) => Part::InputImage {
                    image_url: DataUrl(img),
                },
            })),
        }
    }
}
