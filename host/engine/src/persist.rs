//! Canonical turns ↔ storage rows. The row keeps the neutral fields in columns,
//! tool calls / provider-native lane / side metadata as JSON, so a resumed
//! session gets back exactly the turns it saved.

use crate::turn::{ContentPart, ProviderNative, Role, ToolCall, Turn, TurnMeta};
use serde::{Deserialize, Serialize};
use turnstone_storage::types::{NewTurn, Role as DbRole, StoredTurn};

/// Side data stored in the `meta` column.
#[derive(Debug, Default, Serialize, Deserialize)]
struct StoredMeta {
    #[serde(flatten)]
    meta: TurnMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reasoning: Option<String>,
}

/// Why a row could not be turned back into a turn.
#[derive(Debug, thiserror::Error)]
#[error("stored turn {id} is malformed: {reason}")]
pub struct DecodeError {
    /// Row id.
    pub id: i64,
    /// What is wrong.
    pub reason: String,
}

/// The row for `turn`.
pub fn to_row(turn: &Turn) -> NewTurn {
    let images: Vec<&ContentPart> = turn
        .content
        .iter()
        .filter(|p| matches!(p, ContentPart::Image { .. }))
        .collect();
    let stored_meta = StoredMeta {
        meta: turn.meta.clone(),
        reasoning: turn.reasoning.clone(),
    };
    let meta = serde_json::to_string(&stored_meta)
        .ok()
        .filter(|m| m != "{}");
    NewTurn {
        role: match turn.role {
            Role::System => DbRole::System,
            Role::User => DbRole::User,
            Role::Assistant => DbRole::Assistant,
            Role::Tool => DbRole::Tool,
        },
        content: Some(turn.text_content()),
        tool_name: turn.tool_name.clone(),
        tool_call_id: turn.tool_call_id.clone(),
        tool_calls: (!turn.tool_calls.is_empty())
            .then(|| serde_json::to_string(&turn.tool_calls).unwrap_or_else(|_| "[]".into())),
        provider_data: turn
            .native
            .as_ref()
            .and_then(|n| serde_json::to_string(n).ok()),
        source: turn.meta.source.clone(),
        event_id: turn.meta.event_id,
        is_error: turn.is_error,
        attachments: (!images.is_empty())
            .then(|| serde_json::to_string(&images).unwrap_or_else(|_| "[]".into())),
        meta,
    }
}

/// The turn a row stores.
pub fn from_row(row: &StoredTurn) -> Result<Turn, DecodeError> {
    let bad = |reason: String| DecodeError { id: row.id, reason };
    let mut content = vec![ContentPart::Text {
        text: row.turn.content.clone().unwrap_or_default(),
    }];
    if let Some(a) = &row.turn.attachments {
        let images: Vec<ContentPart> =
            serde_json::from_str(a).map_err(|e| bad(format!("attachments: {e}")))?;
        content.extend(images);
    }
    let tool_calls: Vec<ToolCall> = match &row.turn.tool_calls {
        Some(t) => serde_json::from_str(t).map_err(|e| bad(format!("tool_calls: {e}")))?,
        None => Vec::new(),
    };
    let native: Option<ProviderNative> = match &row.turn.provider_data {
        Some(p) => Some(serde_json::from_str(p).map_err(|e| bad(format!("provider_data: {e}")))?),
        None => None,
    };
    let stored: StoredMeta = match &row.turn.meta {
        Some(m) => serde_json::from_str(m).map_err(|e| bad(format!("meta: {e}")))?,
        None => StoredMeta::default(),
    };
    let mut meta = stored.meta;
    meta.source = row.turn.source.clone().or(meta.source);
    meta.event_id = row.turn.event_id.or(meta.event_id);
    Ok(Turn {
        role: match row.turn.role {
            DbRole::System => Role::System,
            DbRole::User => Role::User,
            DbRole::Assistant => Role::Assistant,
            DbRole::Tool => Role::Tool,
        },
        content,
        tool_calls,
        tool_call_id: row.turn.tool_call_id.clone(),
        tool_name: row.turn.tool_name.clone(),
        is_error: row.turn.is_error,
        reasoning: stored.reasoning,
        native,
        meta,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::EffectStatus;

    #[test]
    fn turns_survive_the_round_trip() {
        let mut t = Turn::text(Role::Assistant, "Let me check.");
        t.tool_calls = vec![ToolCall {
            id: "c1".into(),
            name: "bash".into(),
            arguments: "{\"command\":  \"ls\"}".into(),
        }];
        t.reasoning = Some("thinking…".into());
        t.native = Some(ProviderNative {
            provider: "anthropic".into(),
            blocks: serde_json::json!([{"type": "thinking", "signature": "s"}]),
        });
        t.meta.source = Some("operator".into());
        let mut tool = Turn::tool_result(&t.tool_calls[0], "out", true);
        tool.meta.effect = Some(EffectStatus::Unknown);
        for turn in [t, tool] {
            let stored = StoredTurn {
                id: 1,
                ws_id: "w".into(),
                timestamp: String::new(),
                turn: to_row(&turn),
            };
            assert_eq!(from_row(&stored).unwrap(), turn);
        }
    }
}
