//! The front-end boundary: what a session tells its UI (CLI, server) and asks it.

use async_trait::async_trait;

/// Session states shown to users.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// Waiting for input.
    Idle,
    /// The model is generating.
    Thinking,
    /// Tools are running.
    Running,
    /// Waiting for the user (approval).
    Attention,
    /// The last turn failed.
    Error,
}

/// One tool call as shown in an approval prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingTool {
    /// Call id.
    pub call_id: String,
    /// Tool name.
    pub name: String,
    /// One-line header, e.g. `bash: ls -la`.
    pub header: String,
    /// Longer preview (a diff, a command).
    pub preview: Option<String>,
    /// Whether this item blocks on the user.
    pub needs_approval: bool,
    /// Set when the call was refused before approval (bad arguments).
    pub error: Option<String>,
}

/// The user's answer to an approval cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// Run the batch.
    pub approved: bool,
    /// Also auto-approve these tools from now on.
    pub always: bool,
    /// Text passed on to the model.
    pub feedback: Option<String>,
}

/// Callbacks a front end implements (the reference's SessionUI set).
#[async_trait]
pub trait SessionUi: Send + Sync {
    /// A model turn starts.
    fn on_turn_start(&self) {}
    /// Thinking indicator on.
    fn on_thinking_start(&self) {}
    /// Thinking indicator off.
    fn on_thinking_stop(&self) {}
    /// Streamed reasoning text.
    fn on_reasoning_token(&self, _text: &str) {}
    /// Streamed reply text.
    fn on_content_token(&self, _text: &str) {}
    /// The model stream ended.
    fn on_stream_end(&self) {}
    /// A tool batch was prepared (headers, previews, refusals), before any
    /// approval is asked for.
    fn on_tools_prepared(&self, _items: &[PendingTool]) {}
    /// Asks the user about a batch (cycle id, items). Only called when at least
    /// one item needs approval.
    async fn approve_tools(&self, cycle_id: u64, items: &[PendingTool]) -> Approval;
    /// Live output of a running tool.
    fn on_tool_output_chunk(&self, _call_id: &str, _chunk: &str) {}
    /// A tool finished.
    fn on_tool_result(&self, _call_id: &str, _name: &str, _output: &str, _is_error: bool) {}
    /// Status line (tokens, context).
    fn on_status(&self, _prompt_tokens: u32, _completion_tokens: u32, _context_window: u32) {}
    /// Informational notice.
    fn on_info(&self, _message: &str) {}
    /// Error notice.
    fn on_error(&self, _message: &str) {}
    /// State transition.
    fn on_state_change(&self, _state: SessionState) {}
    /// The assistant turn was committed to history.
    fn on_turn_commit(&self) {}
}
