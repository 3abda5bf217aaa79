//! Orphan repair: before every model request, each assistant tool call must be
//! answered by a tool turn. Unanswered calls (a cancelled or crashed batch) get
//! a synthetic result saying the outcome is unknown; tool turns answering no
//! call are left out of the request (providers reject them). Stored history is
//! never changed by this; it shapes the request view only.

use crate::turn::{EffectStatus, Role, Turn};

/// The result text the model sees for a call that may have started but has no
/// recorded result.
pub const CANCELLED_UNKNOWN: &str = "Tool execution was cancelled. Outcome UNKNOWN — this call may have begun executing before the generation was stopped; do not assume it did not run, and reconcile before re-issuing it.";

/// Returns the request view of `turns` with every tool call answered.
pub fn repair_orphans(turns: &[Turn]) -> Vec<Turn> {
    let mut out = Vec::with_capacity(turns.len() + 2);
    let mut i = 0;
    while i < turns.len() {
        let turn = &turns[i];
        i += 1;
        if turn.role == Role::Tool {
            // A tool turn not directly after its assistant turn answers nothing.
            continue;
        }
        out.push(turn.clone());
        if turn.role != Role::Assistant || turn.tool_calls.is_empty() {
            continue;
        }
        let mut answered: Vec<&str> = Vec::new();
        while i < turns.len() && turns[i].role == Role::Tool {
            let result = &turns[i];
            i += 1;
            let id = result.tool_call_id.as_deref().unwrap_or("");
            let known = turn.tool_calls.iter().any(|c| c.id == id);
            if known && !answered.contains(&id) {
                answered.push(id);
                out.push(result.clone());
            }
        }
        for call in &turn.tool_calls {
            if !answered.contains(&call.id.as_str()) {
                let mut synthetic = Turn::tool_result(call, CANCELLED_UNKNOWN, true);
                synthetic.meta.effect = Some(EffectStatus::Unknown);
                out.push(synthetic);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn::ToolCall;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{}".into(),
        }
    }

    fn assistant(ids: &[&str]) -> Turn {
        Turn {
            tool_calls: ids.iter().map(|i| call(i)).collect(),
            ..Turn::text(Role::Assistant, "")
        }
    }

    fn shape(turns: &[Turn]) -> Vec<String> {
        turns
            .iter()
            .map(|t| match t.role {
                Role::Tool => format!(
                    "tool:{}:{}",
                    t.tool_call_id.as_deref().unwrap_or("?"),
                    if t.text_content() == CANCELLED_UNKNOWN {
                        "synthetic"
                    } else {
                        "real"
                    }
                ),
                r => format!("{r:?}").to_lowercase(),
            })
            .collect()
    }

    #[test]
    fn unanswered_calls_get_synthetic_results_after_real_ones() {
        let turns = vec![
            Turn::text(Role::User, "q"),
            assistant(&["c1", "c2"]),
            Turn::tool_result(&call("c1"), "ok", false),
            Turn::text(Role::User, "never mind"),
            assistant(&["c3"]),
        ];
        let fixed = repair_orphans(&turns);
        assert_eq!(
            shape(&fixed),
            [
                "user",
                "assistant",
                "tool:c1:real",
                "tool:c2:synthetic",
                "user",
                "assistant",
                "tool:c3:synthetic"
            ]
        );
        assert_eq!(fixed[3].meta.effect, Some(EffectStatus::Unknown));
        assert_eq!(fixed[3].tool_name.as_deref(), Some("t"));
    }

    #[test]
    fn stray_and_duplicate_results_are_dropped_and_complete_batches_untouched() {
        let turns = vec![
            Turn::tool_result(&call("zz"), "stray", false),
            Turn::text(Role::User, "q"),
            assistant(&["c1"]),
            Turn::tool_result(&call("c1"), "ok", false),
            Turn::tool_result(&call("c1"), "again", false),
            Turn::tool_result(&call("other"), "wrong batch", false),
            Turn::text(Role::Assistant, "done"),
        ];
        let fixed = repair_orphans(&turns);
        assert_eq!(
            shape(&fixed),
            ["user", "assistant", "tool:c1:real", "assistant"]
        );
        let complete = repair_orphans(&fixed);
        assert_eq!(complete, fixed, "repair is idempotent");
    }
}
