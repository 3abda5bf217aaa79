//! The node-wide event stream (`/v1/api/events/global`): workstream lifecycle,
//! state, activity and approvals. Frames are tagged with the owning user so an
//! ordinary user's stream can be filtered to their own workstreams.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::broadcast;

/// One global frame.
#[derive(Debug, Clone)]
pub struct GlobalEvent {
    /// `<boot epoch hex>-<counter>`.
    pub id: Arc<str>,
    /// Owner of the workstream it concerns (`None`: node-wide).
    pub owner: Option<Arc<str>>,
    /// JSON body.
    pub json: Arc<str>,
}

/// The global hub.
pub struct GlobalHub {
    epoch: String,
    counter: AtomicU64,
    tx: broadcast::Sender<GlobalEvent>,
}

impl Default for GlobalHub {
    fn default() -> Self {
        Self::new()
    }
}

impl GlobalHub {
    /// A hub whose ids carry this boot's epoch.
    pub fn new() -> Self {
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let (tx, _) = broadcast::channel(4096);
        Self {
            epoch: format!("{epoch:x}"),
            counter: AtomicU64::new(0),
            tx,
        }
    }

    /// Publishes `event`, owned by `owner`.
    pub fn publish(&self, owner: Option<&str>, event: &turnstone_protocol::GlobalEvent) {
        if self.tx.receiver_count() == 0 {
            return;
        }
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        let _ = self.tx.send(GlobalEvent {
            id: Arc::from(format!("{}-{n}", self.epoch)),
            owner: owner.map(Arc::from),
            json: Arc::from(turnstone_protocol::wire::to_json(event)),
        });
    }

    /// A live receiver.
    pub fn subscribe(&self) -> broadcast::Receiver<GlobalEvent> {
        self.tx.subscribe()
    }

    /// Live subscribers.
    pub fn subscribers(&self) -> usize {
        self.tx.receiver_count()
    }
}
