//! The work interfaces of WIT 0.2.0 — `agents`, `watches`,
//! `notify-targets` and `preview` — on the host side: each call checks the
//! plugin's capability (a denial carries the grant to add) and is answered by
//! the calling session ([`super::agent::SessionHost`]).

use super::agent::NO_SESSION;
use crate::bindings::v0_2_0::host::turnstone::plugin0_2_0::{
    agents, notify_targets, preview, watches,
};
use crate::state::HostState;

pub use agents::{AgentError, TaskRequest, TaskResult};
pub use notify_targets::{Notification, NotifyError, Target, TargetKind};
pub use preview::{AttachmentData, Content, Opened, PreviewError};
pub use watches::{Watch, WatchError, WatchSpec};

/// The error of a session without watches.
pub fn watches_unavailable() -> WatchError {
    WatchError::Unavailable("watches are not available in this session".into())
}

/// The error of a session without a preview pane.
pub fn preview_unavailable() -> PreviewError {
    PreviewError::Unavailable("there is no preview pane in this session".into())
}

/// Runs `f` on a task of its own. Host calls of a guest run on the guest's
/// fiber stack, where the condition parser's stack guard cannot measure
/// what is left (it would refuse every condition); a task has a thread's.
async fn off_fiber<T: Send + 'static>(
    f: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T, String> {
    tokio::spawn(f)
        .await
        .map_err(|e| format!("the host task failed: {e}"))
}

impl agents::Host for HostState {
    async fn run_task(
        &mut self,
        request: TaskRequest,
    ) -> wasmtime::Result<Result<TaskResult, AgentError>> {
        if let Err(d) = self.plugin.caps.check_agents() {
            return Ok(Err(AgentError::Denied(self.deny(&d))));
        }
        let Some(session) = self.session_host() else {
            return Ok(Err(AgentError::Unavailable(NO_SESSION.into())));
        };
        let call_id = self.call_id.clone().unwrap_or_default();
        Ok(session.run_task(call_id, request).await)
    }
}

/// Checks the watches capability, then asks the session.
macro_rules! watch_call {
    ($self:ident, |$s:ident| $call:expr) => {{
        if let Err(d) = $self.plugin.caps.check_watches() {
            return Ok(Err(WatchError::Denied($self.deny(&d))));
        }
        match $self.session_host() {
            Some($s) => Ok($call.await),
            None => Ok(Err(WatchError::Unavailable(NO_SESSION.into()))),
        }
    }};
}

impl watches::Host for HostState {
    async fn check_condition(&mut self, condition: String) -> wasmtime::Result<Result<(), String>> {
        if let Err(d) = self.plugin.caps.check_watches() {
            return Ok(Err(d.to_string()));
        }
        Ok(off_fiber(async move {
            turnstone_watch::Condition::parse(&condition)
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .await
        .unwrap_or_else(Err))
    }

    async fn create(&mut self, spec: WatchSpec) -> wasmtime::Result<Result<Watch, WatchError>> {
        let plugin = self.plugin.name.clone();
        watch_call!(self, |s| async move {
            off_fiber(s.watch_create(plugin, spec))
                .await
                .unwrap_or_else(|e| Err(WatchError::Unavailable(e)))
        })
    }

    async fn list(&mut self) -> wasmtime::Result<Result<Vec<Watch>, WatchError>> {
        watch_call!(self, |s| s.watch_list())
    }

    async fn cancel(&mut self, name_or_id: String) -> wasmtime::Result<Result<Watch, WatchError>> {
        watch_call!(self, |s| s.watch_cancel(name_or_id))
    }
}

impl notify_targets::Host for HostState {
    async fn list(&mut self) -> wasmtime::Result<Result<Vec<Target>, NotifyError>> {
        if let Err(d) = self.plugin.caps.check_notify() {
            return Ok(Err(NotifyError::Denied(self.deny(&d))));
        }
        match self.session_host() {
            Some(s) => Ok(s.notify_targets().await),
            None => Ok(Err(NotifyError::Unavailable(NO_SESSION.into()))),
        }
    }

    async fn deliver(
        &mut self,
        target: String,
        notification: Notification,
    ) -> wasmtime::Result<Result<String, NotifyError>> {
        if let Err(d) = self.plugin.caps.check_notify() {
            return Ok(Err(NotifyError::Denied(self.deny(&d))));
        }
        match self.session_host() {
            Some(s) => Ok(s.notify_deliver(target, notification).await),
            None => Ok(Err(NotifyError::Unavailable(NO_SESSION.into()))),
        }
    }
}

impl preview::Host for HostState {
    async fn attachment(
        &mut self,
        id: String,
    ) -> wasmtime::Result<Result<AttachmentData, PreviewError>> {
        if let Err(d) = self.plugin.caps.check_preview() {
            return Ok(Err(PreviewError::Denied(self.deny(&d))));
        }
        match self.session_host() {
            Some(s) => Ok(s.preview_attachment(id).await),
            None => Ok(Err(PreviewError::Unavailable(NO_SESSION.into()))),
        }
    }

    async fn open(&mut self, content: Content) -> wasmtime::Result<Result<Opened, PreviewError>> {
        if let Err(d) = self.plugin.caps.check_preview() {
            return Ok(Err(PreviewError::Denied(self.deny(&d))));
        }
        let call_id = self.call_id.clone().unwrap_or_default();
        match self.session_host() {
            Some(s) => Ok(s.preview_open(call_id, content).await),
            None => Ok(Err(PreviewError::Unavailable(NO_SESSION.into()))),
        }
    }
}
