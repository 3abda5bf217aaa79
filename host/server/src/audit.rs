//! The audit log from the server's side: who did what, from where. Rows
//! are written before the answer goes out; a failed write is logged and
//! never fails the action it records.

use serde_json::Value;
use turnstone_storage::Storage;
use turnstone_storage::prelude::*;

/// Appends one row.
pub async fn record(
    db: &Storage,
    user_id: Option<&str>,
    ip: Option<std::net::IpAddr>,
    action: &str,
    target: Option<&str>,
    detail: Value,
) {
    let entry = AuditEntry {
        id: 0,
        timestamp: String::new(),
        user_id: user_id.map(str::to_string),
        action: action.to_string(),
        target: target.map(str::to_string),
        detail: (!detail.is_null()).then(|| detail.to_string()),
        ip: ip.map(|i| i.to_string()),
    };
    if let Err(e) = db.append_audit(&entry).await {
        tracing::error!(action, "audit log write failed: {e}");
    }
}
