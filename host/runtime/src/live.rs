//! The plugin set as running sessions see it: an immutable [`PluginRegistry`]
//! snapshot behind a pointer that the reconciler swaps atomically.
//!
//! Readers take a snapshot (one `Arc` clone under a read lock held for
//! nanoseconds) per model request or tool batch. A call in flight holds its
//! own `Arc<LoadedPlugin>`, so it finishes on the version it started with; the
//! old version is dropped when its last call returns.

use crate::registry::PluginRegistry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// A swappable plugin registry.
pub struct LivePlugins {
    current: RwLock<Arc<PluginRegistry>>,
    generation: AtomicU64,
}

impl LivePlugins {
    /// A live set starting at `registry`.
    pub fn new(registry: PluginRegistry) -> Arc<Self> {
        Self::from_arc(Arc::new(registry))
    }

    /// A live set starting at an already shared registry.
    pub fn from_arc(registry: Arc<PluginRegistry>) -> Arc<Self> {
        Arc::new(Self {
            current: RwLock::new(registry),
            generation: AtomicU64::new(0),
        })
    }

    /// The registry in force now.
    pub fn snapshot(&self) -> Arc<PluginRegistry> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How many swaps happened (0 at start).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Replaces the registry; the next snapshot sees the new one.
    pub fn swap(&self, registry: PluginRegistry) {
        let new = Arc::new(registry);
        let old = {
            let mut cur = self.current.write().unwrap_or_else(|p| p.into_inner());
            std::mem::replace(&mut *cur, new)
        };
        self.generation.fetch_add(1, Ordering::AcqRel);
        // Dropped outside the lock: the last reference may tear down plugins.
        drop(old);
    }
}

/// What a session holds to find its tools: a live set, or a fixed registry
/// wrapped as one (one-shot commands and tests).
#[derive(Clone)]
pub struct PluginSet(Arc<LivePlugins>);

impl PluginSet {
    /// The registry in force now.
    pub fn snapshot(&self) -> Arc<PluginRegistry> {
        self.0.snapshot()
    }

    /// The live set behind it.
    pub fn live(&self) -> &Arc<LivePlugins> {
        &self.0
    }
}

impl From<Arc<LivePlugins>> for PluginSet {
    fn from(live: Arc<LivePlugins>) -> Self {
        Self(live)
    }
}

impl From<Arc<PluginRegistry>> for PluginSet {
    fn from(registry: Arc<PluginRegistry>) -> Self {
        Self(LivePlugins::from_arc(registry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_outlives_a_swap_and_the_next_one_sees_the_new_registry() {
        let live = LivePlugins::new(PluginRegistry::default());
        let before = live.snapshot();
        live.swap(PluginRegistry::default());
        let after = live.snapshot();
        assert!(!Arc::ptr_eq(&before, &after));
        assert_eq!(live.generation(), 1);
        assert_eq!(
            Arc::strong_count(&before),
            1,
            "only the reader holds the old one"
        );
    }
}
