//! Failed-login throttling, on by default (`[auth.login_throttle]`): a token
//! bucket per client address and one per username; each failed login takes a
//! token from both, and a login is refused with 429 while either is empty —
//! before any password is hashed, so guessing costs the server nothing.
//! A successful login refills its username's bucket. Buckets live in memory
//! and are pruned when the table grows, never by a timer.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// `[auth.login_throttle]`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoginThrottleConfig {
    /// On unless disabled.
    pub enabled: bool,
    /// Failed logins a client address may make in a burst.
    pub per_ip_burst: u32,
    /// Then this many more per minute.
    pub per_ip_per_minute: f64,
    /// Failed logins one username may receive in a burst.
    pub per_user_burst: u32,
    /// Then this many more per minute.
    pub per_user_per_minute: f64,
}

impl Default for LoginThrottleConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            per_ip_burst: 10,
            per_ip_per_minute: 10.0,
            per_user_burst: 5,
            per_user_per_minute: 3.0,
        }
    }
}

impl LoginThrottleConfig {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), String> {
        let rate_ok = |r: f64| r.is_finite() && r > 0.0;
        if self.per_ip_burst == 0 || self.per_user_burst == 0 {
            return Err("[auth.login_throttle] bursts must be at least 1".into());
        }
        if !rate_ok(self.per_ip_per_minute) || !rate_ok(self.per_user_per_minute) {
            return Err("[auth.login_throttle] per-minute rates must be positive numbers".into());
        }
        Ok(())
    }
}

/// Entries kept per table before full (idle) buckets are dropped.
const PRUNE_ABOVE: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

struct Table<K> {
    burst: f64,
    per_sec: f64,
    buckets: Mutex<HashMap<K, Bucket>>,
}

impl<K: Hash + Eq + Clone> Table<K> {
    fn new(burst: u32, per_minute: f64) -> Self {
        Self {
            burst: f64::from(burst),
            per_sec: per_minute / 60.0,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    fn refilled(&self, b: Bucket, now: Instant) -> f64 {
        (b.tokens + now.duration_since(b.at).as_secs_f64() * self.per_sec).min(self.burst)
    }

    /// How long until `key` may try again (`None`: now).
    fn wait(&self, key: &K, now: Instant) -> Option<Duration> {
        let map = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let tokens = map.get(key).map(|b| self.refilled(*b, now))?;
        (tokens < 1.0).then(|| Duration::from_secs_f64((1.0 - tokens) / self.per_sec))
    }

    fn take(&self, key: &K, now: Instant) {
        let mut map = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= PRUNE_ABOVE {
            let burst = self.burst;
            map.retain(|_, b| self.refilled(*b, now) < burst);
        }
        let tokens = map.get(key).map_or(self.burst, |b| self.refilled(*b, now));
        map.insert(
            key.clone(),
            Bucket {
                tokens: (tokens - 1.0).max(0.0),
                at: now,
            },
        );
    }

    fn reset(&self, key: &K) {
        self.buckets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }
}

/// The throttle.
pub struct LoginThrottle {
    enabled: bool,
    ips: Table<IpAddr>,
    users: Table<String>,
}

impl LoginThrottle {
    /// A throttle for `cfg` (validate it first).
    pub fn new(cfg: &LoginThrottleConfig) -> Self {
        Self {
            enabled: cfg.enabled,
            ips: Table::new(cfg.per_ip_burst, cfg.per_ip_per_minute),
            users: Table::new(cfg.per_user_burst, cfg.per_user_per_minute),
        }
    }

    fn user_key(name: &str) -> String {
        name.trim().to_lowercase()
    }

    /// `Err(wait)` when the address or the username must wait before another
    /// attempt.
    pub fn check(&self, ip: Option<IpAddr>, username: Option<&str>) -> Result<(), Duration> {
        if !self.enabled {
            return Ok(());
        }
        let now = Instant::now();
        let by_ip = ip.and_then(|ip| self.ips.wait(&ip, now));
        let by_user = username.and_then(|u| self.users.wait(&Self::user_key(u), now));
        match by_ip.into_iter().chain(by_user).max() {
            Some(wait) => Err(wait),
            None => Ok(()),
        }
    }

    /// Records a failed attempt.
    pub fn failed(&self, ip: Option<IpAddr>, username: Option<&str>) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if let Some(ip) = ip {
            self.ips.take(&ip, now);
        }
        if let Some(u) = username {
            self.users.take(&Self::user_key(u), now);
        }
    }

    /// Records a successful login: the username's failures are forgotten.
    pub fn succeeded(&self, username: &str) {
        self.users.reset(&Self::user_key(username));
    }
}

impl Default for LoginThrottle {
    fn default() -> Self {
        Self::new(&LoginThrottleConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> LoginThrottleConfig {
        LoginThrottleConfig {
            enabled: true,
            per_ip_burst: 3,
            per_ip_per_minute: 60.0,
            per_user_burst: 2,
            per_user_per_minute: 30.0,
        }
    }

    #[test]
    fn failures_empty_the_buckets_and_time_refills_them() {
        let t = LoginThrottle::new(&cfg());
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        for _ in 0..3 {
            assert!(t.check(Some(ip), Some("nobody")).is_ok());
            t.failed(Some(ip), None);
        }
        let wait = t.check(Some(ip), None).unwrap_err();
        assert!(
            wait > Duration::from_millis(500) && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        assert!(t.check(Some(other), None).is_ok(), "addresses are separate");
        // Two failures for one username from different addresses lock the name.
        t.failed(Some(other), Some("Alice"));
        t.failed(Some("192.0.2.3".parse().unwrap()), Some("alice "));
        let wait = t
            .check(Some("192.0.2.4".parse().unwrap()), Some("ALICE"))
            .unwrap_err();
        assert!(
            wait > Duration::from_secs(1) && wait <= Duration::from_secs(2),
            "{wait:?}"
        );
        t.succeeded("alice");
        assert!(t.check(None, Some("alice")).is_ok());
    }

    #[test]
    fn buckets_refill_over_time() {
        let table: Table<u8> = Table::new(1, 600.0); // one every 100 ms
        let start = Instant::now();
        table.take(&1, start);
        assert!(table.wait(&1, start).is_some());
        assert!(table.wait(&1, start + Duration::from_millis(100)).is_none());
    }

    #[test]
    fn the_table_is_pruned_not_grown_without_bound() {
        let table: Table<u32> = Table::new(1, 6000.0);
        let start = Instant::now();
        for k in 0..PRUNE_ABOVE as u32 {
            table.take(&k, start);
        }
        // Later every old bucket has refilled: the next insert drops them.
        table.take(&u32::MAX, start + Duration::from_secs(5));
        assert_eq!(table.buckets.lock().unwrap().len(), 1);
    }

    #[test]
    fn disabled_never_throttles_and_bad_values_are_refused() {
        let t = LoginThrottle::new(&LoginThrottleConfig {
            enabled: false,
            ..cfg()
        });
        for _ in 0..100 {
            t.failed(None, Some("x"));
        }
        assert!(t.check(None, Some("x")).is_ok());
        assert!(
            LoginThrottleConfig {
                per_user_burst: 0,
                ..cfg()
            }
            .validate()
            .is_err()
        );
        assert!(
            LoginThrottleConfig {
                per_ip_per_minute: f64::NAN,
                ..cfg()
            }
            .validate()
            .is_err()
        );
    }
}
