//! `turnstone:plugin/kv`: a small per-plugin key-value store.
//!
//! The backend is a trait so the storage crate can provide a persistent one; the
//! built-in backend keeps values in memory for the life of the host process.

use crate::bindings::v0_1_0::host::turnstone::plugin::kv;
use crate::state::HostState;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Largest value a plugin may store.
pub const MAX_VALUE_BYTES: usize = 1 << 20;
/// Most keys one plugin may hold.
pub const MAX_KEYS: usize = 10_000;

/// A namespaced key-value backend (one namespace per plugin).
pub trait KvStore: Send + Sync {
    /// Reads a value.
    fn get(&self, key: &str) -> Option<Vec<u8>>;
    /// Writes a value; errors are shown to the guest.
    fn set(&self, key: &str, value: Vec<u8>) -> Result<(), String>;
    /// Removes a key; true when it existed.
    fn delete(&self, key: &str) -> bool;
    /// Keys starting with `prefix`, sorted.
    fn list_keys(&self, prefix: &str) -> Vec<String>;
}

/// In-memory [`KvStore`].
#[derive(Default)]
pub struct MemoryKv {
    map: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl KvStore for MemoryKv {
    fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.map.lock().ok()?.get(key).cloned()
    }

    fn set(&self, key: &str, value: Vec<u8>) -> Result<(), String> {
        if value.len() > MAX_VALUE_BYTES {
            return Err(format!(
                "value of {} bytes exceeds the {MAX_VALUE_BYTES}-byte limit",
                value.len()
            ));
        }
        let mut map = self
            .map
            .lock()
            .map_err(|_| "kv store poisoned".to_string())?;
        if !map.contains_key(key) && map.len() >= MAX_KEYS {
            return Err(format!("the plugin already holds {MAX_KEYS} keys"));
        }
        map.insert(key.to_string(), value);
        Ok(())
    }

    fn delete(&self, key: &str) -> bool {
        self.map
            .lock()
            .map(|mut m| m.remove(key).is_some())
            .unwrap_or(false)
    }

    fn list_keys(&self, prefix: &str) -> Vec<String> {
        self.map
            .lock()
            .map(|m| {
                m.range(prefix.to_string()..)
                    .take_while(|(k, _)| k.starts_with(prefix))
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl kv::Host for HostState {
    async fn get(&mut self, key: String) -> wasmtime::Result<Option<Vec<u8>>> {
        Ok(self.plugin.kv.get(&key))
    }

    async fn set(&mut self, key: String, value: Vec<u8>) -> wasmtime::Result<Result<(), String>> {
        Ok(self.plugin.kv.set(&key, value))
    }

    async fn delete(&mut self, key: String) -> wasmtime::Result<bool> {
        Ok(self.plugin.kv.delete(&key))
    }

    async fn list_keys(&mut self, prefix: String) -> wasmtime::Result<Vec<String>> {
        Ok(self.plugin.kv.list_keys(&prefix))
    }
}
