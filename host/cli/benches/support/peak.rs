//! What a burst's peak resident size is made of. `VmHWM` gives the peak but
//! not its parts, and the parts differ in kind: anonymous pages (heap, linear
//! memories, stacks) are the process's own, file pages (the binary's code,
//! component images) depend on the page cache's state as much as on the code
//! (docs/server.md, "Peak RSS in A/B runs is partly page cache"). A thread
//! reads `/proc/<pid>/status` every few milliseconds during the burst and
//! keeps the reading with the largest `VmRSS`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the status file is read: a burst of 100 turns lasts 200–400 ms.
const EVERY: Duration = Duration::from_millis(4);

/// One reading of a process's resident memory, in MB.
#[derive(Clone, Copy, Debug)]
pub struct Resident {
    /// `VmRSS`.
    pub total: f64,
    /// `RssAnon`.
    pub anon: f64,
    /// `RssFile` (and `RssShmem`, which this server does not use).
    pub file: f64,
}

impl Resident {
    /// Reads `pid`'s status; zeros when it has gone.
    fn read(pid: u32) -> Self {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let kb = |key: &str| {
            status
                .lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse::<f64>().ok())
                .unwrap_or(0.0)
                / 1024.0
        };
        Self {
            total: kb("VmRSS:"),
            anon: kb("RssAnon:"),
            file: kb("RssFile:") + kb("RssShmem:"),
        }
    }
}

impl std::fmt::Display for Resident {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "sampled peak {:.1} MB = anonymous {:.1} + file {:.1}",
            self.total, self.anon, self.file
        )
    }
}

/// Samples a process until [`PeakSampler::finish`].
pub struct PeakSampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Resident>,
}

impl PeakSampler {
    /// Starts sampling `pid` on a thread of its own (not a task: the
    /// bench's runtime is busy with the burst it measures).
    pub fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = Resident::read(pid);
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(EVERY);
                let now = Resident::read(pid);
                if now.total > peak.total {
                    peak = now;
                }
            }
            peak
        });
        Self { stop, thread }
    }

    /// The reading with the largest `VmRSS` since the start. Sampled, so
    /// its total can fall short of `VmHWM` by what lived for less than a
    /// sampling interval (and the kernel updates the two at different
    /// moments: they differed by up to 0.3 MB either way).
    pub fn finish(self) -> Resident {
        self.stop.store(true, Ordering::Relaxed);
        // A reading of zeros would pass for a measurement.
        self.thread
            .join()
            .expect("the peak sampler thread panicked")
    }
}
