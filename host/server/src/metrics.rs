//! Process metrics in Prometheus text format (`/metrics`).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

/// HTTP request series: (method, route, status) → (count, total seconds).
type HttpSeries = BTreeMap<(String, String, u16), (u64, f64)>;

/// Counters and gauges kept by the server.
#[derive(Default)]
pub struct Metrics {
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    tool_calls: AtomicU64,
    turns: AtomicU64,
    failed_turns: AtomicU64,
    requests: AtomicU64,
    /// Engine events of running turns: a long reply or tool run moves it.
    engine_events: AtomicU64,
    evicted: AtomicU64,
    ratelimited: AtomicU64,
    connections_refused: AtomicU64,
    logins_throttled: AtomicU64,
    /// Open SSE connections.
    pub sse_connections: AtomicI64,
    /// Times an SSE subscriber fell behind its live channel, by outcome.
    sse_resynced: AtomicU64,
    sse_truncated: AtomicU64,
    sse_global_truncated: AtomicU64,
    /// The model backend failed the latest turn that reached it.
    backend_down: std::sync::atomic::AtomicBool,
    /// (method, route, status) → (count, seconds).
    http: Mutex<HttpSeries>,
    /// Signalled when a figure of the global `aggregate` event may have
    /// changed, so its publisher sleeps while nothing happens.
    aggregate_changed: tokio::sync::Notify,
}

/// How an SSE subscriber that fell behind its live channel went on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseLag {
    /// A workstream stream caught up from the replay ring, losing nothing.
    Resynced,
    /// A workstream stream had fallen behind the ring too and was told how
    /// many events it lost (`replay_truncated`).
    Truncated,
    /// The node-wide stream skipped events and said so.
    GlobalTruncated,
}

/// Facts gathered at scrape time.
pub struct Snapshot<'a> {
    /// Workstreams by state name.
    pub workstreams: BTreeMap<&'static str, usize>,
    /// Seconds since start.
    pub uptime: f64,
    /// Default model id.
    pub model: &'a str,
    /// (plugin, calls, failures, denials, largest linear memory of a call).
    pub plugins: Vec<(String, u64, u64, u64, u64)>,
    /// (plugin, state) for every plugin this node knows.
    pub plugin_states: Vec<(String, &'static str)>,
    /// How many times the plugin registry was swapped since start.
    pub plugin_generation: u64,
    /// MCP servers: (name, state label, calls, failures, breaker openings).
    pub mcp: Vec<(String, &'static str, u64, u64, u64)>,
    /// Plugin instance slots: (capacity, in use, calls waiting for one).
    pub instance_slots: Option<(usize, usize, usize)>,
}

impl Metrics {
    /// Adds token usage.
    pub fn tokens(&self, prompt: u32, completion: u32) {
        self.prompt_tokens.fetch_add(u64::from(prompt), Relaxed);
        self.completion_tokens
            .fetch_add(u64::from(completion), Relaxed);
        self.aggregate_touched();
    }

    /// Adds tool calls.
    pub fn tool_calls(&self, n: u64) {
        self.tool_calls.fetch_add(n, Relaxed);
        self.aggregate_touched();
    }

    /// Something the `aggregate` event reports may have changed (a workstream
    /// came, went, started or finished a turn).
    pub fn aggregate_touched(&self) {
        self.aggregate_changed.notify_one();
    }

    /// Waits for [`Self::aggregate_touched`] (a change before the wait counts).
    pub async fn aggregate_change(&self) {
        self.aggregate_changed.notified().await;
    }

    /// Counts a finished turn.
    pub fn turn_finished(&self, failed: bool) {
        self.turns.fetch_add(1, Relaxed);
        if failed {
            self.failed_turns.fetch_add(1, Relaxed);
        }
    }

    /// Records whether the latest model call succeeded; true when that
    /// changes the backend's health.
    pub fn set_backend_up(&self, up: bool) -> bool {
        self.backend_down.swap(!up, Relaxed) == up
    }

    /// Whether the model backend is considered up.
    pub fn backend_up(&self) -> bool {
        !self.backend_down.load(Relaxed)
    }

    /// Counts an eviction.
    pub fn evicted(&self) {
        self.evicted.fetch_add(1, Relaxed);
    }

    /// Counts a rate-limit rejection.
    pub fn ratelimited(&self) {
        self.ratelimited.fetch_add(1, Relaxed);
    }

    /// Counts a connection refused by the per-address cap.
    pub fn connection_refused(&self) {
        self.connections_refused.fetch_add(1, Relaxed);
    }

    /// Counts a login refused by the failed-login throttle.
    pub fn login_throttled(&self) {
        self.logins_throttled.fetch_add(1, Relaxed);
    }

    /// Counts one time an SSE subscriber fell behind its live channel.
    pub fn sse_lagged(&self, lag: SseLag) {
        let counter = match lag {
            SseLag::Resynced => &self.sse_resynced,
            SseLag::Truncated => &self.sse_truncated,
            SseLag::GlobalTruncated => &self.sse_global_truncated,
        };
        counter.fetch_add(1, Relaxed);
    }

    /// Totals used by the dashboard: (tokens, tool calls).
    pub fn totals(&self) -> (u64, u64) {
        (
            self.prompt_tokens.load(Relaxed) + self.completion_tokens.load(Relaxed),
            self.tool_calls.load(Relaxed),
        )
    }

    /// A figure that grows with every HTTP request, every engine event of a
    /// running turn and every finished turn: the memory purge waits for it
    /// to stop moving.
    pub fn activity(&self) -> u64 {
        self.requests.load(Relaxed) + self.engine_events.load(Relaxed) + self.turns.load(Relaxed)
    }

    /// Counts one engine event of a running turn (text, a tool call, …).
    pub fn engine_event(&self) {
        self.engine_events.fetch_add(1, Relaxed);
    }

    /// Records one HTTP request.
    pub fn request(&self, method: &str, route: &str, status: u16, secs: f64) {
        self.requests.fetch_add(1, Relaxed);
        let mut m = self.http.lock().unwrap_or_else(|p| p.into_inner());
        let e = m
            .entry((method.to_string(), route.to_string(), status))
            .or_default();
        e.0 += 1;
        e.1 += secs;
    }

    /// Renders everything.
    pub fn render(&self, snap: &Snapshot<'_>) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "# HELP turnstone_build_info Build information.");
        let _ = writeln!(o, "# TYPE turnstone_build_info gauge");
        let _ = writeln!(
            o,
            "turnstone_build_info{{version=\"{}\",model=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION"),
            escape(snap.model)
        );
        let _ = writeln!(o, "# TYPE turnstone_uptime_seconds gauge");
        let _ = writeln!(o, "turnstone_uptime_seconds {:.3}", snap.uptime);
        let _ = writeln!(o, "# TYPE turnstone_workstreams gauge");
        for (state, n) in &snap.workstreams {
            let _ = writeln!(o, "turnstone_workstreams{{state=\"{state}\"}} {n}");
        }
        let counters = [
            (
                "turnstone_tokens_total{kind=\"prompt\"}",
                &self.prompt_tokens,
            ),
            (
                "turnstone_tokens_total{kind=\"completion\"}",
                &self.completion_tokens,
            ),
            ("turnstone_tool_calls_total", &self.tool_calls),
            ("turnstone_turns_total", &self.turns),
            ("turnstone_turns_failed_total", &self.failed_turns),
            ("turnstone_workstreams_evicted_total", &self.evicted),
            ("turnstone_ratelimit_rejected_total", &self.ratelimited),
            (
                "turnstone_http_connections_refused_total",
                &self.connections_refused,
            ),
            ("turnstone_logins_throttled_total", &self.logins_throttled),
            (
                "turnstone_sse_lag_total{stream=\"workstream\",outcome=\"resynced\"}",
                &self.sse_resynced,
            ),
            (
                "turnstone_sse_lag_total{stream=\"workstream\",outcome=\"truncated\"}",
                &self.sse_truncated,
            ),
            (
                "turnstone_sse_lag_total{stream=\"global\",outcome=\"truncated\"}",
                &self.sse_global_truncated,
            ),
        ];
        // One TYPE line per family: the series of a family are adjacent, and
        // a second TYPE line for a name is an error to Prometheus' parser.
        let mut family = "";
        for (name, v) in counters {
            let base = name.split('{').next().unwrap_or(name);
            if base != family {
                let _ = writeln!(o, "# TYPE {base} counter");
                family = base;
            }
            let _ = writeln!(o, "{name} {}", v.load(Relaxed));
        }
        let _ = writeln!(o, "# TYPE turnstone_sse_connections gauge");
        let _ = writeln!(
            o,
            "turnstone_sse_connections {}",
            self.sse_connections.load(Relaxed)
        );
        // Each family's samples together after its TYPE line, as the text
        // format requires (strict parsers reject interleaved families).
        let http = self.http.lock().unwrap_or_else(|p| p.into_inner());
        let labels = |(method, route, status): &(String, String, u16)| {
            format!(
                "method=\"{method}\",route=\"{}\",status=\"{status}\"",
                escape(route)
            )
        };
        let _ = writeln!(o, "# TYPE turnstone_http_requests_total counter");
        for (key, (n, _)) in http.iter() {
            let labels = labels(key);
            let _ = writeln!(o, "turnstone_http_requests_total{{{labels}}} {n}");
        }
        let _ = writeln!(o, "# TYPE turnstone_http_request_duration_seconds summary");
        for (key, (n, secs)) in http.iter() {
            let labels = labels(key);
            let _ = writeln!(
                o,
                "turnstone_http_request_duration_seconds_sum{{{labels}}} {secs:.6}"
            );
            let _ = writeln!(
                o,
                "turnstone_http_request_duration_seconds_count{{{labels}}} {n}"
            );
        }
        let _ = writeln!(o, "# TYPE turnstone_plugin_registry_generation counter");
        let _ = writeln!(
            o,
            "turnstone_plugin_registry_generation {}",
            snap.plugin_generation
        );
        let _ = writeln!(o, "# TYPE turnstone_plugin_state gauge");
        for (name, state) in &snap.plugin_states {
            let _ = writeln!(
                o,
                "turnstone_plugin_state{{plugin=\"{}\",state=\"{state}\"}} 1",
                escape(name)
            );
        }
        for (kind, idx) in [("calls", 1), ("failures", 2), ("denials", 3)] {
            let _ = writeln!(o, "# TYPE turnstone_plugin_{kind}_total counter");
            for p in &snap.plugins {
                let v = match idx {
                    1 => p.1,
                    2 => p.2,
                    _ => p.3,
                };
                let _ = writeln!(
                    o,
                    "turnstone_plugin_{kind}_total{{plugin=\"{}\"}} {v}",
                    escape(&p.0)
                );
            }
        }
        let _ = writeln!(
            o,
            "# HELP turnstone_plugin_memory_peak_bytes The largest linear memory one call of the plugin reached since start."
        );
        let _ = writeln!(o, "# TYPE turnstone_plugin_memory_peak_bytes gauge");
        for p in &snap.plugins {
            let _ = writeln!(
                o,
                "turnstone_plugin_memory_peak_bytes{{plugin=\"{}\"}} {}",
                escape(&p.0),
                p.4
            );
        }
        if let Some((capacity, in_use, waiting)) = snap.instance_slots {
            let _ = writeln!(
                o,
                "# HELP turnstone_instance_slots Plugin instance slots: calls admitted at once, held by running calls, and calls waiting for one."
            );
            let _ = writeln!(o, "# TYPE turnstone_instance_slots gauge");
            for (state, n) in [
                ("capacity", capacity),
                ("in_use", in_use),
                ("waiting", waiting),
            ] {
                let _ = writeln!(o, "turnstone_instance_slots{{state=\"{state}\"}} {n}");
            }
        }
        if let Some(heap) = crate::memory::heap_stats() {
            let _ = writeln!(
                o,
                "# HELP turnstone_heap_bytes Heap held by the allocator: in live allocations, or free but not yet returned to the system."
            );
            let _ = writeln!(o, "# TYPE turnstone_heap_bytes gauge");
            let _ = writeln!(
                o,
                "turnstone_heap_bytes{{state=\"in_use\"}} {}",
                heap.in_use
            );
            let _ = writeln!(o, "turnstone_heap_bytes{{state=\"free\"}} {}", heap.free);
        }
        // MCP servers are plugins too; their state and counters by server.
        let _ = writeln!(o, "# TYPE turnstone_mcp_server_state gauge");
        for (name, state, ..) in &snap.mcp {
            let _ = writeln!(
                o,
                "turnstone_mcp_server_state{{server=\"{}\",state=\"{state}\"}} 1",
                escape(name)
            );
        }
        for (kind, idx) in [("calls", 0), ("failures", 1), ("breaker_openings", 2)] {
            let _ = writeln!(o, "# TYPE turnstone_mcp_{kind}_total counter");
            for m in &snap.mcp {
                let v = [m.2, m.3, m.4][idx];
                let _ = writeln!(
                    o,
                    "turnstone_mcp_{kind}_total{{server=\"{}\"}} {v}",
                    escape(&m.0)
                );
            }
        }
        o
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_running_turns_events_and_finished_turns_all_count_as_activity() {
        let m = Metrics::default();
        let mut last = m.activity();
        type Step<'a> = (&'a str, &'a dyn Fn(&Metrics));
        let steps: [Step; 3] = [
            ("request", &|m| m.request("GET", "/health", 200, 0.001)),
            ("engine event", &|m| m.engine_event()),
            ("finished turn", &|m| m.turn_finished(false)),
        ];
        for (what, step) in steps {
            step(&m);
            let now = m.activity();
            assert!(now > last, "a {what} moved nothing");
            last = now;
        }
    }

    #[test]
    fn every_family_has_one_type_line_and_sse_lag_is_counted_by_outcome() {
        let m = Metrics::default();
        m.tokens(3, 4);
        m.request("GET", "/health", 200, 0.001);
        m.sse_lagged(SseLag::Resynced);
        m.sse_lagged(SseLag::Resynced);
        m.sse_lagged(SseLag::GlobalTruncated);
        let snap = Snapshot {
            workstreams: BTreeMap::from([("idle", 1), ("running", 2)]),
            uptime: 1.0,
            model: "m",
            plugins: vec![("a".into(), 1, 0, 0, 65536), ("b".into(), 2, 1, 0, 1 << 20)],
            plugin_states: vec![("a".into(), "enabled"), ("b".into(), "enabled")],
            plugin_generation: 1,
            mcp: vec![("s".into(), "connected", 1, 0, 0)],
            instance_slots: Some((8, 1, 0)),
        };
        m.request("POST", "/v1/api/auth/login", 401, 0.002);
        let text = m.render(&snap);
        // Every sample follows its own family's TYPE line, and a family's
        // samples are not interleaved with another's.
        let mut families = std::collections::HashSet::new();
        let mut current = String::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap_or_default().to_string();
                assert!(families.insert(name.clone()), "second TYPE for {name}");
                current = name;
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let sample = line.split(['{', ' ']).next().unwrap_or_default();
            let family = ["_sum", "_count"]
                .iter()
                .find_map(|s| sample.strip_suffix(s).filter(|f| families.contains(*f)))
                .unwrap_or(sample);
            assert_eq!(family, current, "{line} outside its family");
        }
        assert!(families.contains("turnstone_tokens_total"));
        let value = |series: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
                .unwrap_or_else(|| panic!("no {series} in {text}"))
                .to_string()
        };
        let lag = |stream: &str, outcome: &str| {
            value(&format!(
                "turnstone_sse_lag_total{{stream=\"{stream}\",outcome=\"{outcome}\"}}"
            ))
        };
        assert_eq!(lag("workstream", "resynced"), "2");
        assert_eq!(lag("workstream", "truncated"), "0");
        assert_eq!(lag("global", "truncated"), "1");
        assert_eq!(value("turnstone_tokens_total{kind=\"completion\"}"), "4");
        assert_eq!(
            value("turnstone_plugin_memory_peak_bytes{plugin=\"b\"}"),
            "1048576"
        );
    }
}
