//! Lowering canonical turns to the provider WIT: the one boundary where the
//! provider-neutral history becomes what a provider component sees.

use crate::turn::{ContentPart, Role, Turn};
use turnstone_runtime::bindings::v0_1_0::host::turnstone::plugin::types::ImageData;
use turnstone_runtime::provider_types as wit;

/// Resolves an attachment id to a `data:` URL (the blob store's job).
pub trait AttachmentResolver {
    /// The data URL for `attachment_id`, if known.
    fn data_url(&self, attachment_id: &str) -> Option<String>;
}

/// Why lowering failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LowerError {
    /// An attachment id the resolver does not know.
    #[error("unknown attachment {0}")]
    UnknownAttachment(String),
    /// A URL that is not a base64 `data:` URL.
    #[error("image is not a base64 data URL")]
    BadDataUrl,
}

fn parse_data_url(url: &str) -> Result<ImageData, LowerError> {
    let rest = url.strip_prefix("data:").ok_or(LowerError::BadDataUrl)?;
    let (media_type, data) = rest.split_once(";base64,").ok_or(LowerError::BadDataUrl)?;
    Ok(ImageData {
        media_type: media_type.to_string(),
        data_base64: data.to_string(),
    })
}

/// Replaces every image a tool returned in `messages` with a line of text
/// saying what it was, for a model that cannot take images (text-only
/// servers refuse a request carrying one). Images the user attached are
/// theirs to send and stay. Returns how many were replaced.
pub fn describe_images(messages: &mut [wit::Message], model: &str) -> usize {
    let mut replaced = 0;
    for m in messages.iter_mut().filter(|m| m.role == wit::Role::Tool) {
        for part in &mut m.content {
            if let wit::ContentPart::Image(img) = part {
                // Four base64 characters carry three bytes.
                let kb = (img.data_base64.len() / 4 * 3).div_ceil(1024);
                *part = wit::ContentPart::Text(format!(
                    "\n[{} image, {kb} KB, not shown: {model} cannot view images]",
                    img.media_type
                ));
                replaced += 1;
            }
        }
    }
    replaced
}

/// Lowers `turns` for a provider of flavour `provider`. Provider-native blocks
/// are passed on only to the flavour family that produced them; what of them
/// is replayed is the provider's decision (reasoning only with the request's
/// `replay_reasoning`; server-side tool blocks such as a tool search always,
/// since they keep the tools they loaded loaded).
pub fn to_wit_messages(
    turns: &[Turn],
    provider: &str,
    attachments: &dyn AttachmentResolver,
) -> Result<Vec<wit::Message>, LowerError> {
    let family = |p: &str| p.split('-').next().unwrap_or(p).to_string();
    turns
        .iter()
        .map(|t| {
            let content = t
                .content
                .iter()
                .map(|p| match p {
                    ContentPart::Text { text } => Ok(wit::ContentPart::Text(text.clone())),
                    // Inline data wins; an id alone is resolved by the blob store.
                    ContentPart::Image { url: Some(url), .. } => {
                        Ok(wit::ContentPart::Image(parse_data_url(url)?))
                    }
                    ContentPart::Image {
                        attachment_id: Some(id),
                        ..
                    } => {
                        let url = attachments
                            .data_url(id)
                            .ok_or_else(|| LowerError::UnknownAttachment(id.clone()))?;
                        Ok(wit::ContentPart::Image(parse_data_url(&url)?))
                    }
                    ContentPart::Image { .. } => Err(LowerError::BadDataUrl),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let provider_data = t
                .native
                .as_ref()
                .filter(|n| family(&n.provider) == family(provider))
                .map(|n| n.blocks.to_string());
            Ok(wit::Message {
                role: match t.role {
                    Role::System => wit::Role::System,
                    Role::User => wit::Role::User,
                    Role::Assistant => wit::Role::Assistant,
                    Role::Tool => wit::Role::Tool,
                },
                content,
                tool_calls: t
                    .tool_calls
                    .iter()
                    .map(|c| wit::ToolCall {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    })
                    .collect(),
                tool_call_id: t.tool_call_id.clone(),
                tool_name: t.tool_name.clone(),
                is_error: t.is_error,
                reasoning: t.reasoning.clone(),
                provider_data,
                source: t.meta.source.clone(),
            })
        })
        .collect()
}
