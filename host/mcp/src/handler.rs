//! The client half rmcp calls back into: notifications from a server become
//! [`Notice`]s for its supervisor (which refreshes the list); progress goes
//! straight to the call it belongs to.

use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProgressToken,
    ProtocolVersion,
};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::UnboundedSender;

/// Where progress of each request in flight goes, by its progress token.
#[derive(Default)]
pub struct ProgressRoutes(
    Mutex<HashMap<ProgressToken, UnboundedSender<ProgressNotificationParam>>>,
);

impl ProgressRoutes {
    /// Routes progress for `token` to `tx` until [`ProgressRoutes::remove`].
    pub fn insert(&self, token: ProgressToken, tx: UnboundedSender<ProgressNotificationParam>) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(token, tx);
    }

    /// Stops routing `token`.
    pub fn remove(&self, token: &ProgressToken) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(token);
    }

    fn route(&self, p: ProgressNotificationParam) {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = map.get(&p.progress_token) {
            let _ = tx.send(p);
        }
    }
}

/// What a server told us.
#[derive(Debug)]
pub enum Notice {
    /// `notifications/tools/list_changed`.
    ToolsChanged,
    /// `notifications/resources/list_changed`.
    ResourcesChanged,
    /// `notifications/prompts/list_changed`.
    PromptsChanged,
}

/// Forwards notifications to the supervisor.
pub struct Handler {
    notices: UnboundedSender<Notice>,
    progress: Arc<ProgressRoutes>,
}

impl Handler {
    /// A handler feeding `notices` and routing progress through `progress`.
    pub fn new(notices: UnboundedSender<Notice>, progress: Arc<ProgressRoutes>) -> Self {
        Self { notices, progress }
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // The newest version with an `initialize` handshake: every server of
        // the 2024–2025 revisions answers it, and list_changed notifications
        // arrive through the callbacks below.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("turnstone", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        let _ = self.notices.send(Notice::ToolsChanged);
    }

    async fn on_resource_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        let _ = self.notices.send(Notice::ResourcesChanged);
    }

    async fn on_prompt_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        let _ = self.notices.send(Notice::PromptsChanged);
    }

    async fn on_progress(
        &self,
        p: ProgressNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        self.progress.route(p);
    }
}
