//! The node's watch scheduler delivers results through the workstream
//! manager: a result is a notice for its workstream, which is loaded if it
//! is not (a closed or evicted workstream wakes up for it), and watch
//! changes reach the workstream's live stream.

use crate::manager::{Manager, ManagerError};
use futures::future::BoxFuture;
use std::sync::{Arc, Weak};
use turnstone_engine::watch::NoticeDelivery;
use turnstone_protocol::{Event, Op, WatchChanged, WatchInfo};

/// Delivers watch results to the manager's workstreams.
pub struct ManagerDelivery {
    mgr: Weak<Manager>,
}

impl ManagerDelivery {
    /// Delivery into `mgr` (held weakly: the scheduler never keeps a
    /// stopped manager alive).
    pub fn new(mgr: &Arc<Manager>) -> Arc<Self> {
        Arc::new(Self {
            mgr: Arc::downgrade(mgr),
        })
    }
}

impl NoticeDelivery for ManagerDelivery {
    fn deliver(
        &self,
        ws_id: String,
        content: String,
        meta: serde_json::Value,
    ) -> BoxFuture<'static, Result<bool, String>> {
        let mgr = self.mgr.upgrade();
        Box::pin(async move {
            let mgr = mgr.ok_or_else(|| "the server is stopping".to_string())?;
            let ws = match mgr.open(&ws_id, None).await {
                Ok(w) => w,
                // Deleted since: nobody will read it.
                Err(ManagerError::NotFound) => return Ok(false),
                Err(e) => return Err(e.to_string()),
            };
            let _starting = ws.starting.lock().await;
            ws.session
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

    fn changed(&self, ws_id: &str, watch: WatchInfo) {
        if let Some(w) = self.mgr.upgrade().and_then(|m| m.get(ws_id)) {
            w.core.emit(Event::WatchChanged(WatchChanged { watch }));
        }
    }
}
