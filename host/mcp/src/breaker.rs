//! A circuit breaker per server: consecutive failures open it for a while;
//! after that one half-open probe decides whether it closes again.

use std::time::{Duration, Instant};

/// Failures in a row that open the circuit.
pub const DEFAULT_THRESHOLD: u32 = 3;
/// How long an open circuit refuses calls before a probe is let through.
pub const DEFAULT_COOL_DOWN: Duration = Duration::from_secs(30);

/// Breaker state as shown to operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls flow.
    Closed,
    /// Calls are refused until the instant passes.
    Open {
        /// When a probe may go through.
        until: Instant,
    },
    /// One probe is in flight; other calls are refused until it answers.
    HalfOpen,
}

/// The breaker.
#[derive(Debug, Clone)]
pub struct Breaker {
    threshold: u32,
    cool_down: Duration,
    failures: u32,
    state: BreakerState,
    openings: u64,
}

impl Default for Breaker {
    fn default() -> Self {
        Self::new(DEFAULT_THRESHOLD, DEFAULT_COOL_DOWN)
    }
}

/// Whether a call may go out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Go.
    Allowed,
    /// Go, as the half-open probe.
    Probe,
    /// Refused: the circuit is open for this much longer.
    Refused(Duration),
}

impl Breaker {
    /// A breaker opening after `threshold` failures for `cool_down`.
    pub fn new(threshold: u32, cool_down: Duration) -> Self {
        Self {
            threshold: threshold.max(1),
            cool_down,
            failures: 0,
            state: BreakerState::Closed,
            openings: 0,
        }
    }

    /// Asks to send a call at `now`.
    pub fn admit(&mut self, now: Instant) -> Admission {
        match self.state {
            BreakerState::Closed => Admission::Allowed,
            BreakerState::Open { until } if now >= until => {
                self.state = BreakerState::HalfOpen;
                Admission::Probe
            }
            BreakerState::Open { until } => Admission::Refused(until - now),
            BreakerState::HalfOpen => Admission::Refused(Duration::ZERO),
        }
    }

    /// A call (or connection attempt) succeeded: the circuit closes.
    pub fn success(&mut self) {
        self.failures = 0;
        self.state = BreakerState::Closed;
    }

    /// A call failed at `now`. Returns true when this failure opened the circuit.
    pub fn failure(&mut self, now: Instant) -> bool {
        self.failures = self.failures.saturating_add(1);
        let open = matches!(self.state, BreakerState::HalfOpen) || self.failures >= self.threshold;
        if open && !matches!(self.state, BreakerState::Open { .. }) {
            self.state = BreakerState::Open {
                until: now + self.cool_down,
            };
            self.openings += 1;
            return true;
        }
        false
    }

    /// The half-open probe ended without an answer (cancelled or dropped):
    /// let the next call probe again at once instead of staying half-open.
    pub fn abandon_probe(&mut self, now: Instant) {
        if self.state == BreakerState::HalfOpen {
            self.state = BreakerState::Open { until: now };
        }
    }

    /// The state now.
    pub fn state(&self) -> BreakerState {
        self.state
    }

    /// How many times the circuit opened.
    pub fn openings(&self) -> u64 {
        self.openings
    }

    /// Consecutive failures so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_open_it_a_probe_after_the_cool_down_closes_it() {
        let t0 = Instant::now();
        let mut b = Breaker::new(2, Duration::from_secs(10));
        assert_eq!(b.admit(t0), Admission::Allowed);
        assert!(!b.failure(t0));
        assert!(b.failure(t0), "the second failure opens it");
        assert_eq!(b.openings(), 1);
        assert_eq!(
            b.admit(t0 + Duration::from_secs(4)),
            Admission::Refused(Duration::from_secs(6))
        );
        assert_eq!(b.admit(t0 + Duration::from_secs(10)), Admission::Probe);
        assert_eq!(
            b.admit(t0 + Duration::from_secs(10)),
            Admission::Refused(Duration::ZERO),
            "one probe at a time"
        );
        b.success();
        assert_eq!(b.state(), BreakerState::Closed);
        assert_eq!(b.admit(t0 + Duration::from_secs(11)), Admission::Allowed);
    }

    #[test]
    fn a_failed_probe_opens_it_again_at_once() {
        let t0 = Instant::now();
        let mut b = Breaker::new(3, Duration::from_secs(5));
        for _ in 0..3 {
            b.failure(t0);
        }
        assert_eq!(b.admit(t0 + Duration::from_secs(5)), Admission::Probe);
        assert!(b.failure(t0 + Duration::from_secs(5)));
        assert_eq!(b.openings(), 2);
        assert!(matches!(
            b.admit(t0 + Duration::from_secs(6)),
            Admission::Refused(_)
        ));
    }

    #[test]
    fn an_abandoned_probe_lets_the_next_call_probe() {
        let t0 = Instant::now();
        let mut b = Breaker::new(1, Duration::from_secs(5));
        b.failure(t0);
        assert_eq!(b.admit(t0 + Duration::from_secs(5)), Admission::Probe);
        b.abandon_probe(t0 + Duration::from_secs(6));
        assert_eq!(b.admit(t0 + Duration::from_secs(6)), Admission::Probe);
        b.success();
        assert_eq!(b.admit(t0 + Duration::from_secs(6)), Admission::Allowed);
    }

    #[test]
    fn a_success_resets_the_count() {
        let t0 = Instant::now();
        let mut b = Breaker::new(2, Duration::from_secs(5));
        b.failure(t0);
        b.success();
        assert!(
            !b.failure(t0),
            "one failure after a success does not open it"
        );
        assert_eq!(b.state(), BreakerState::Closed);
    }
}
