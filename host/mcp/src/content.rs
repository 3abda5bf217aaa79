//! MCP results as the text a model reads.

use base64::Engine as _;
use rmcp::model::{
    CallToolResult, ContentBlock, GetPromptResult, ReadResourceResult, ResourceContents, Role,
};

/// A tool result: every text block in order; other blocks described in one
/// line each (images and audio are not passed to the model as bytes here);
/// structured content when no text came with it.
pub fn tool_result_text(r: &CallToolResult) -> String {
    let mut parts: Vec<String> = r.content.iter().map(block_text).collect();
    if parts.iter().all(|p| p.is_empty())
        && let Some(s) = &r.structured_content
    {
        parts = vec![s.to_string()];
    }
    parts.retain(|p| !p.is_empty());
    parts.join("\n")
}

fn block_text(b: &ContentBlock) -> String {
    match b {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::Image(i) => {
            format!("[image: {}, {} bytes]", i.mime_type, decoded_len(&i.data))
        }
        ContentBlock::Audio(a) => {
            format!("[audio: {}, {} bytes]", a.mime_type, decoded_len(&a.data))
        }
        ContentBlock::Resource(e) => resource_contents_text(&e.resource),
        ContentBlock::ResourceLink(r) => format!(
            "[resource link: {}{}]",
            r.uri,
            r.description
                .as_deref()
                .map(|d| format!(" — {d}"))
                .unwrap_or_default()
        ),
        _ => "[unsupported content block]".into(),
    }
}

fn decoded_len(b64: &str) -> usize {
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map(|v| v.len())
        .unwrap_or(b64.len() * 3 / 4)
}

/// One resource's contents: text as is, a blob as its base64 with a header
/// naming its type and size.
pub fn resource_contents_text(c: &ResourceContents) -> String {
    match c {
        ResourceContents::TextResourceContents { text, .. } => text.clone(),
        ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            ..
        } => format!(
            "[blob {uri} ({}, {} bytes), base64]\n{blob}",
            mime_type.as_deref().unwrap_or("application/octet-stream"),
            decoded_len(blob)
        ),
        _ => "[unsupported resource contents]".into(),
    }
}

/// `resources/read`: every part, blank-line separated.
pub fn read_resource_text(r: &ReadResourceResult) -> String {
    r.contents
        .iter()
        .map(resource_contents_text)
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// `prompts/get`, as the reference formats it: `[role]: content` blocks
/// joined with blank lines.
pub fn prompt_text(r: &GetPromptResult) -> String {
    r.messages
        .iter()
        .map(|m| {
            let role = match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            format!("[{role}]: {}", block_text(&m.content))
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}
