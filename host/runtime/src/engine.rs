//! The one wasmtime [`Engine`] shared by every plugin, and its epoch ticker.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
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
    /// Calls admitted at once, each holding one instance; a call beyond them
    /// waits for a slot ([`crate::admission`]). The pool reserves slots for
    /// these plus a reserve for calls nested in them; beyond that,
    /// instantiation fails with a clear error instead of exhausting the host.
    pub max_instances: u32,
    /// Use the pooling allocator (fast instantiation). Off falls back to on-demand.
    pub pooling: bool,
    /// How long a call waits for a free instance slot before it fails
    /// ([`crate::admission`]).
    pub admission_wait: Duration,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            max_memory_bytes: 512 << 20,
            // Every streaming model call holds one instance for the whole
            // reply, so a node serving 1,000 concurrent workstreams needs
            // that many slots. A slot is reserved address space, not memory.
            max_instances: 1024,
            pooling: true,
            admission_wait: Duration::from_secs(30),
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
    // Zero each fiber stack when its call ends: one plugin never sees what
    // another left on a pooled stack, and an idle stack's pages go back to
    // the system instead of staying resident after a burst.
    config.async_stack_zeroing(true);
    // `TURNSTONE_PERFMAP=1` names guest functions for `perf` (a
    // /tmp/perf-<pid>.map of every loaded component's code): how a plugin
    // author or an operator sees where a plugin's time goes.
    if std::env::var_os("TURNSTONE_PERFMAP").is_some_and(|v| v == "1") {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    if opts.pooling {
        let mut pool = PoolingAllocationConfig::default();
        let n = opts.max_instances + crate::admission::reserve_for(opts.max_instances);
        pool.total_component_instances(n);
        // A Rust std guest is a handful of core instances and one memory.
        pool.total_core_instances(n * 4);
        pool.total_memories(n * 2);
        pool.total_tables(n * 4);
        pool.max_memory_size(opts.max_memory_bytes);
        pool.total_stacks(n);
        // A freed slot gives all its pages back (madvise) rather than keeping
        // the first ones resident for a memset: kept pages add up over every
        // slot a burst ever touched (the serve bench's RSS 30 s after a
        // 200-turn burst fell from 99 to 80 MB), while sequential turn
        // latency did not move measurably (3.40 vs 3.44 ms p50).
        pool.linear_memory_keep_resident(0);
        pool.table_keep_resident(0);
        pool.async_stack_keep_resident(0);
        // Freed slots give their pages back in batches where the kernel can
        // (Linux 6.14+): one `process_madvise`, one TLB shootdown of the
        // other cores, per batch instead of one `madvise` per region, which
        // was 6 % of a short turn's CPU in a 1,000-turn burst.
        pool.decommit_batch_size(crate::decommit::decommit_batch_size());
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    Engine::new(&config)
}

/// Whether guest code may be running: the epoch ticker sleeps while no call
/// is in flight, so an idle host never wakes for it.
#[derive(Default)]
pub struct EpochGate {
    active: Mutex<usize>,
    wake: Condvar,
    stop: AtomicBool,
    ticks: AtomicU64,
}

/// Held while a call runs guest code; dropping it lets the ticker rest.
pub struct ActiveCall(Arc<EpochGate>);

impl EpochGate {
    /// Marks a call as running until the returned guard drops.
    pub fn enter(self: &Arc<Self>) -> ActiveCall {
        let mut n = self.active.lock().unwrap_or_else(|p| p.into_inner());
        *n += 1;
        if *n == 1 {
            self.wake.notify_all();
        }
        ActiveCall(self.clone())
    }

    /// Calls in flight.
    pub fn active(&self) -> usize {
        *self.active.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Epoch increments so far.
    pub fn ticks(&self) -> u64 {
        self.ticks.load(Ordering::Relaxed)
    }

    /// Blocks until a call is in flight; false once stopping.
    fn wait_for_work(&self) -> bool {
        let mut n = self.active.lock().unwrap_or_else(|p| p.into_inner());
        while *n == 0 && !self.stop.load(Ordering::Acquire) {
            n = self.wake.wait(n).unwrap_or_else(|p| p.into_inner());
        }
        !self.stop.load(Ordering::Acquire)
    }
}

impl Drop for ActiveCall {
    fn drop(&mut self) {
        let mut n = self.0.active.lock().unwrap_or_else(|p| p.into_inner());
        *n = n.saturating_sub(1);
    }
}

/// Advances the engine's epoch every [`EPOCH_TICK`] on a plain thread (never a
/// tokio worker) while a call is in flight, until dropped. Deadlines count
/// ticks, and ticks only pass while guest code may run, so pausing loses
/// nothing: a store's deadline is set relative to the epoch when it starts.
pub struct EpochTicker {
    gate: Arc<EpochGate>,
    handle: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// Starts ticking `engine`.
    pub fn start(engine: &Engine) -> std::io::Result<Self> {
        let gate = Arc::new(EpochGate::default());
        let weak = engine.weak();
        let g = gate.clone();
        let handle = std::thread::Builder::new()
            .name("turnstone-epoch".into())
            .spawn(move || {
                while g.wait_for_work() {
                    std::thread::sleep(EPOCH_TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                    g.ticks.fetch_add(1, Ordering::Relaxed);
                }
            })?;
        Ok(Self {
            gate,
            handle: Some(handle),
        })
    }

    /// The gate calls enter while they run guest code.
    pub fn gate(&self) -> Arc<EpochGate> {
        self.gate.clone()
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.gate.stop.store(true, Ordering::Release);
        {
            let _n = self.gate.active.lock().unwrap_or_else(|p| p.into_inner());
            self.gate.wake.notify_all();
        }
        if let Some(h) = self.handle.take() {
            // The thread wakes within one tick; joining keeps shutdown tidy.
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_advances_only_while_a_call_is_active() {
        let engine = build_engine(&EngineOptions {
            pooling: false,
            ..Default::default()
        })
        .unwrap();
        let ticker = EpochTicker::start(&engine).unwrap();
        let gate = ticker.gate();
        std::thread::sleep(EPOCH_TICK * 10);
        assert_eq!(gate.ticks(), 0, "no call, no ticks");
        let guard = gate.enter();
        let nested = gate.enter();
        std::thread::sleep(EPOCH_TICK * 10);
        drop(nested);
        assert!(gate.ticks() >= 3, "ticks while active: {}", gate.ticks());
        drop(guard);
        std::thread::sleep(EPOCH_TICK * 3);
        let after = gate.ticks();
        std::thread::sleep(EPOCH_TICK * 10);
        assert_eq!(gate.ticks(), after, "paused again");
        let t = std::time::Instant::now();
        drop(ticker); // stops promptly even while idle
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
    }
}
