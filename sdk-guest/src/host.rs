//! Thin wrappers over the host interfaces: logging, plugin config, secrets,
//! key-value storage and the clock.

use crate::CapabilityError;
use crate::bindings::turnstone::plugin0_1_0::{clock, config, kv, log as wlog};

/// Log levels.
pub use wlog::Level;

/// Writes a line to the host log, tagged with this plugin's name.
pub fn log(level: Level, message: &str) {
    wlog::log(level, message);
}

/// An operator-set configuration value for this plugin.
pub fn config(key: &str) -> Option<String> {
    config::get(key)
}

/// A reference to a granted secret, for use in an HTTP header value. The host
/// substitutes the value when the request leaves; the plugin never sees it.
pub fn secret_ref(name: &str) -> Result<String, CapabilityError> {
    config::secret_ref(name)
}

/// Reads a value from this plugin's key-value namespace.
pub fn kv_get(key: &str) -> Option<Vec<u8>> {
    kv::get(key)
}

/// Writes a value to this plugin's key-value namespace.
pub fn kv_set(key: &str, value: &[u8]) -> Result<(), String> {
    kv::set(key, value)
}

/// Deletes a key; true when it existed.
pub fn kv_delete(key: &str) -> bool {
    kv::delete(key)
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    clock::now_ms()
}

/// Sleeps without blocking the host; false when the call was cancelled.
pub fn sleep_ms(ms: u64) -> bool {
    clock::sleep_ms(ms)
}
