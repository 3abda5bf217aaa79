//! Watches on the engine's side: what the `watches` host interface does for
//! a session (create, list, cancel, checked against the language and the
//! limits), how a watch is shown, and the [`scheduler`] that polls them.

pub mod scheduler;

use turnstone_protocol::WatchInfo;
use turnstone_runtime::host::work::{Watch as WitWatch, WatchError, WatchSpec};
use turnstone_storage::Storage;
use turnstone_storage::types::{NewWatch, Watch};

pub use scheduler::{NoticeDelivery, WatchScheduler};

/// The `source` of a watch's result turn.
pub const SOURCE: &str = "watch";

/// A stored watch as front ends list it.
pub fn info(w: &Watch) -> WatchInfo {
    WatchInfo {
        watch_id: w.watch_id.clone(),
        name: w.name.clone(),
        command: w.command.clone(),
        poll_every_secs: u64::try_from(w.interval_secs).unwrap_or(0),
        stop_on: w.condition.clone(),
        max_polls: u64::try_from(w.max_polls).unwrap_or(0),
        polls: u64::try_from(w.poll_count).unwrap_or(0),
        state: w.state.clone(),
        next_poll: w.next_poll.clone().filter(|_| w.state == "active"),
    }
}

/// A stored watch as the `watches` interface returns it.
pub fn to_wit(w: &Watch) -> WitWatch {
    WitWatch {
        id: w.watch_id.clone(),
        name: w.name.clone(),
        command: w.command.clone(),
        poll_every_secs: u64::try_from(w.interval_secs).unwrap_or(0),
        stop_on: w.condition.clone(),
        max_polls: u64::try_from(w.max_polls).unwrap_or(0),
        polls: u64::try_from(w.poll_count).unwrap_or(0),
        state: w.state.clone(),
        next_poll: w.next_poll.clone().filter(|_| w.state == "active"),
        created: w.created.clone(),
        last_output: w.last_output.clone(),
    }
}

fn store_err(e: turnstone_storage::StorageError) -> WatchError {
    match e {
        turnstone_storage::StorageError::InvalidInput(m) => WatchError::Invalid(m),
        other => WatchError::Unavailable(other.to_string()),
    }
}

/// Checks `spec` (name, command, interval, polls, condition) and creates
/// the watch in `ws_id`, its command to run with `plugin`'s grants.
pub async fn create(
    db: &Storage,
    ws_id: &str,
    plugin: &str,
    spec: WatchSpec,
) -> Result<Watch, WatchError> {
    turnstone_watch::check_spec(
        &spec.name,
        &spec.command,
        spec.poll_every_secs,
        spec.max_polls,
        spec.stop_on.as_deref(),
    )
    .map_err(|e| WatchError::Invalid(e.to_string()))?;
    let to_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    db.create_watch(
        &NewWatch {
            ws_id: ws_id.to_string(),
            name: spec.name,
            command: spec.command,
            interval_secs: to_i64(spec.poll_every_secs),
            condition: spec.stop_on.filter(|c| !c.trim().is_empty()),
            max_polls: to_i64(spec.max_polls),
            plugin: plugin.to_string(),
        },
        turnstone_watch::MAX_ACTIVE_PER_WORKSTREAM as i64,
    )
    .await
    .map_err(store_err)
}

/// The workstream's active watches.
pub async fn list(db: &Storage, ws_id: &str) -> Result<Vec<Watch>, WatchError> {
    db.list_watches(ws_id, true).await.map_err(store_err)
}

/// Cancels an active watch by name or id prefix.
pub async fn cancel(db: &Storage, ws_id: &str, name_or_id: &str) -> Result<Watch, WatchError> {
    db.cancel_watch(ws_id, name_or_id)
        .await
        .map_err(store_err)?
        .ok_or_else(|| {
            WatchError::Invalid(format!(
                "no active watch named {name_or_id:?} (or with that id) in this workstream"
            ))
        })
}
