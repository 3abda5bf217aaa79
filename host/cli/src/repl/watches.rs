//! The terminal's watch scheduler: it polls the watches of the workstreams
//! the terminal has open (others wait until one is opened) and hands each
//! result to that workstream's session as a notice, which starts a turn.

use crate::app::OpenSessions;
use futures::future::BoxFuture;
use std::sync::Arc;
use turnstone_engine::watch::NoticeDelivery;
use turnstone_protocol::{Op, WatchInfo};

/// Delivers watch results to the terminal's open workstreams.
pub struct OpenDelivery {
    open: OpenSessions,
}

impl OpenDelivery {
    /// Delivery into the sessions listed in `open`.
    pub fn new(open: OpenSessions) -> Arc<Self> {
        Arc::new(Self { open })
    }
}

impl NoticeDelivery for OpenDelivery {
    fn deliver(
        &self,
        ws_id: String,
        content: String,
        meta: serde_json::Value,
    ) -> BoxFuture<'static, Result<bool, String>> {
        let handle = self
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&ws_id)
            .cloned();
        Box::pin(async move {
            let handle = handle.ok_or_else(|| format!("workstream {ws_id} is not open here"))?;
            handle
                .submit(Op::Notice {
                    content,
                    source: turnstone_engine::watch::SOURCE.into(),
                    meta,
                })
                .await
                .map(|_| true)
                .map_err(|e| e.to_string())
        })
    }

    fn changed(&self, _ws_id: &str, _watch: WatchInfo) {}

    fn scope(&self) -> Option<Vec<String>> {
        Some(
            self.open
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .keys()
                .cloned()
                .collect(),
        )
    }
}
