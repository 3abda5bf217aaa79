//! The one wasmtime [`Engine`] shared by every plugin, and its epoch ticker.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch advances. Deadlines are measured in these ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Engine-wide limits and knobs.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Upper bound for any single plugin's linear memory (per-plugin caps are lower).
    pub max_memory_bytes: usize,
    /// Concurrent instances the pooling allocator reserves slots for; beyond this,
    /// instantiation fails with a clear error instead of exhausting the host.
    pub max_instances: u32,
    /// Use the pooling allocator (fast instantiation). Off falls back to on-demand.
    pub pooling: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            max_memory_bytes: 512 << 20,
            max_instances: 256,
            pooling: true,
        }
    }
}

/// Builds the engine: component model, async host imports, epoch interruption,
/// and (by default) the pooling allocator. Component-model-async stays off: it
/// is incomplete in wasmtime 48 and triples per-call cost.
pub fn build_engine(opts: &EngineOptions) -> wasmtime::Result<Engine> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    // Without the pooling allocator's copy-on-write images this only costs memory.
    config.memory_init_cow(true);
    if opts.pooling {
        let mut pool = PoolingAllocationConfig::default();
        let n = opts.max_instances;
        pool.total_component_instances(n);
        // A Rust std guest is a handful of core instances and one memory.
        pool.total_core_instances(n * 4);
        pool.total_memories(n * 2);
        pool.total_tables(n * 4);
        pool.max_memory_size(opts.max_memory_bytes);
        pool.total_stacks(n);
        // Reset the first pages of a recycled slot with memset instead of
        // madvise: avoids page faults and TLB shootdowns on every call.
        pool.linear_memory_keep_resident(64 << 10);
        pool.table_keep_resident(64 << 10);
        pool.async_stack_keep_resident(64 << 10);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    Engine::new(&config)
}

/// Advances the engine's epoch every [`EPOCH_TICK`] on a plain thread (never a
/// tokio worker), until dropped.
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// Starts ticking `engine`.
    pub fn start(engine: &Engine) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let weak = engine.weak();
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("turnstone-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })?;
        Ok(Self {
            stop,
            handle: Some(handle),
        })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            // The thread wakes within one tick; joining keeps shutdown tidy.
            let _ = h.join();
        }
    }
}
