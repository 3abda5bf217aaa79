//! Events of the work a session delegates or schedules: sub-agents
//! (`agent_event`, `agent_context`), watches (`watch_changed`, and their
//! results as `system_turn`) and previews (`preview`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Where a sub-agent's event or approval item comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AgentOrigin {
    /// The parent's `task_agent` call that runs the sub-agent.
    pub parent_call_id: String,
    /// The sub-agent's own workstream (its transcript).
    pub agent_ws_id: String,
    /// 1 for a sub-agent of the workstream, 2 for one of a sub-agent.
    pub depth: u32,
}

/// `agent_event`: an event of a sub-agent, shown nested under the parent's
/// `task_agent` call. Its approvals are not wrapped: they are the parent's
/// own `approve_request` cycles, with items marked by [`AgentOrigin`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AgentEvent {
    /// Where it comes from.
    #[serde(flatten)]
    pub origin: AgentOrigin,
    /// The sub-agent's event, as its own stream would carry it (without `ws_id`).
    #[schema(value_type = Object)]
    pub event: Box<crate::Event>,
}

/// `agent_context`: a sub-agent's context use after each of its model calls
/// (contract §3.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AgentContext {
    /// The parent's `task_agent` call.
    pub parent_call_id: String,
    /// Prompt tokens of the sub-agent's latest call.
    pub prompt_tokens: u32,
    /// Its model's context window.
    pub context_window: u32,
}

/// `system_turn`: a notice that joins the conversation as a system turn
/// (a watch result; contract §3.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SystemTurn {
    /// The text the model sees.
    pub content: String,
    /// Who produced it (`watch`).
    pub source: String,
    /// Details for front ends (the watch's id and name, why it fired).
    #[schema(value_type = Object)]
    pub meta: serde_json::Value,
}

/// A watch as front ends list it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WatchInfo {
    /// Its id.
    pub watch_id: String,
    /// Its name (unique among the workstream's active watches).
    pub name: String,
    /// The polled command.
    pub command: String,
    /// Seconds between polls.
    pub poll_every_secs: u64,
    /// The stop condition (none: stop when the output changes).
    pub stop_on: Option<String>,
    /// Polls allowed.
    pub max_polls: u64,
    /// Polls run so far.
    pub polls: u64,
    /// `active`, `fired`, `expired` (max polls reached) or `cancelled`.
    pub state: String,
    /// When the next poll is due (RFC 3339; none once it ended).
    pub next_poll: Option<String>,
}

/// `watch_changed`: a watch of this workstream was created, polled or ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WatchChanged {
    /// The watch as it is now.
    pub watch: WatchInfo,
}

/// `preview`: content to show in the preview pane beside the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Preview {
    /// Its id.
    pub preview_id: String,
    /// `html`, `markdown`, `text`, `image`, `table` or `pdf`.
    pub kind: String,
    /// The pane's title.
    pub title: String,
    /// Media type of the content.
    pub media_type: String,
    /// Bytes.
    pub size: u64,
    /// Where the content is served (behind the same auth as the workstream).
    pub url: String,
    /// The `open_preview` call that opened it.
    pub call_id: Option<String>,
}
