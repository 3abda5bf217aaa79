//! The wire form of events: compact JSON with keys in sorted order (the
//! serialisation through `serde_json::Value`, whose maps are ordered), so a
//! typed event produces the same bytes the server sent when it built events
//! by hand.

use serde::Serialize;

/// `value` as one line of JSON with sorted keys.
pub fn to_json<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(v) => v.to_string(),
        // Our types are plain data (string keys, finite numbers): they always
        // convert. Should one not, the frame says so instead of vanishing.
        Err(e) => {
            serde_json::json!({"type": "error", "message": format!("event not serialisable: {e}")})
                .to_string()
        }
    }
}

#[cfg(test)]
mod tests;
