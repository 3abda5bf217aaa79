//! Failed-login throttling, on by default (`[auth.login_throttle]`): a token
//! bucket per client address and one per username. Each login attempt takes
//! a token from both as it starts, and is refused with 429 while either is
//! empty — before any password is hashed, so guessing costs the server
//! nothing. A successful login gives the address its token back and forgets
//! the username's failures, so only failures add up. Buckets live in memory
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, Bucket>> {
        self.buckets.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn tokens(&self, map: &HashMap<K, Bucket>, key: &K, now: Instant) -> f64 {
        map.get(key).map_or(self.burst, |b| {
            (b.tokens + now.duration_since(b.at).as_secs_f64() * self.per_sec).min(self.burst)
        })
    }

    /// How long until `key` has a token (`None`: it has one now).
    fn wait(&self, map: &HashMap<K, Bucket>, key: &K, now: Instant) -> Option<Duration> {
        let t = self.tokens(map, key, now);
        (t < 1.0).then(|| Duration::from_secs_f64((1.0 - t) / self.per_sec))
    }

    /// Adds `delta` tokens to `key` (negative takes).
    fn adjust(&self, map: &mut HashMap<K, Bucket>, key: &K, delta: f64, now: Instant) {
        if map.len() >= PRUNE_ABOVE && !map.contains_key(key) {
            let full: Vec<K> = map
                .keys()
                .filter(|k| self.tokens(map, k, now) >= self.burst)
                .cloned()
                .collect();
            for k in full {
                map.remove(&k);
            }
        }
        let tokens = (self.tokens(map, key, now) + delta).clamp(0.0, self.burst);
        if tokens >= self.burst {
            map.remove(key);
        } else {
            map.insert(key.clone(), Bucket { tokens, at: now });
        }
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

    /// Admits one login attempt: takes a token from the address's and the
    /// username's bucket, or (taking none) says how long to wait. Counting
    /// attempts as they start, not failures as they end, means a burst of
    /// concurrent guesses cannot all slip in before the first one fails.
    pub fn attempt(&self, ip: Option<IpAddr>, username: Option<&str>) -> Result<(), Duration> {
        if !self.enabled {
            return Ok(());
        }
        let now = Instant::now();
        let ip = ip.map(crate::ratelimit::client_key);
        let user = username.map(Self::user_key);
        // Fixed lock order: addresses, then usernames.
        let mut ips = self.ips.lock();
        let mut users = self.users.lock();
        let by_ip = ip.and_then(|ip| self.ips.wait(&ips, &ip, now));
        let by_user = user.as_ref().and_then(|u| self.users.wait(&users, u, now));
        if let Some(wait) = by_ip.into_iter().chain(by_user).max() {
            return Err(wait);
        }
        if let Some(ip) = ip {
            self.ips.adjust(&mut ips, &ip, -1.0, now);
        }
        if let Some(u) = &user {
            self.users.adjust(&mut users, u, -1.0, now);
        }
        Ok(())
    }

    /// The admitted attempt succeeded: the address gets its token back and
    /// the username's failures are forgotten.
    pub fn succeeded(&self, ip: Option<IpAddr>, username: Option<&str>) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if let Some(ip) = ip.map(crate::ratelimit::client_key) {
            let mut ips = self.ips.lock();
            self.ips.adjust(&mut ips, &ip, 1.0, now);
        }
        if let Some(u) = username {
            self.users.lock().remove(&Self::user_key(u));
        }
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
    fn attempts_take_tokens_and_the_empty_bucket_says_how_long_to_wait() {
        let t = LoginThrottle::new(&cfg());
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        for _ in 0..3 {
            assert!(t.attempt(Some(ip), None).is_ok());
        }
        let wait = t.attempt(Some(ip), None).unwrap_err();
        assert!(
            wait > Duration::from_millis(500) && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        assert!(
            t.attempt(Some(other), None).is_ok(),
            "addresses are separate"
        );
        // An IPv6 client is its /64: rotating the interface id does not help.
        for i in 1..=3 {
            let v6: IpAddr = format!("2001:db8:7:7::{i}").parse().unwrap();
            assert!(t.attempt(Some(v6), None).is_ok());
        }
        let rotated: IpAddr = "2001:db8:7:7:ffff::9".parse().unwrap();
        assert!(t.attempt(Some(rotated), None).is_err());
        // Two attempts on one username from different addresses lock the name.
        t.attempt(Some(other), Some("Alice")).unwrap();
        t.attempt(Some("192.0.2.3".parse().unwrap()), Some("alice "))
            .unwrap();
        let wait = t
            .attempt(Some("192.0.2.4".parse().unwrap()), Some("ALICE"))
            .unwrap_err();
        assert!(
            wait > Duration::from_secs(1) && wait <= Duration::from_secs(2),
            "{wait:?}"
        );
        // A refused attempt took nothing from the address.
        assert!(t.attempt(Some("192.0.2.4".parse().unwrap()), None).is_ok());
        t.succeeded(None, Some("alice"));
        assert!(t.attempt(None, Some("alice")).is_ok());
    }

    #[test]
    fn a_success_gives_the_address_its_token_back() {
        let t = LoginThrottle::new(&cfg());
        let ip: IpAddr = "192.0.2.9".parse().unwrap();
        for _ in 0..10 {
            t.attempt(Some(ip), Some("bob")).unwrap();
            t.succeeded(Some(ip), Some("bob"));
        }
        assert!(t.attempt(Some(ip), Some("bob")).is_ok());
    }

    #[test]
    fn buckets_refill_over_time() {
        let table: Table<u8> = Table::new(1, 600.0); // one every 100 ms
        let start = Instant::now();
        let mut map = table.lock();
        table.adjust(&mut map, &1, -1.0, start);
        assert!(table.wait(&map, &1, start).is_some());
        assert!(
            table
                .wait(&map, &1, start + Duration::from_millis(100))
                .is_none()
        );
    }

    #[test]
    fn the_table_is_pruned_not_grown_without_bound() {
        let table: Table<u32> = Table::new(1, 6000.0);
        let start = Instant::now();
        let mut map = table.lock();
        for k in 0..PRUNE_ABOVE as u32 {
            table.adjust(&mut map, &k, -1.0, start);
        }
        assert_eq!(map.len(), PRUNE_ABOVE);
        // Later every old bucket has refilled: the next insert drops them.
        table.adjust(&mut map, &u32::MAX, -1.0, start + Duration::from_secs(5));
        assert_eq!(map.len(), 1);
    }

    #[test]
    fn disabled_never_throttles_and_bad_values_are_refused() {
        let t = LoginThrottle::new(&LoginThrottleConfig {
            enabled: false,
            ..cfg()
        });
        for _ in 0..100 {
            assert!(t.attempt(None, Some("x")).is_ok());
        }
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
