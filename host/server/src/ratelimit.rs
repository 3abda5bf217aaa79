//! Optional per-client-IP rate limiting (`[ratelimit]`): a token bucket per
//! address (the `governor` crate's GCRA), 429 with `Retry-After` when empty.
//! `/health` and `/metrics` are exempt so monitoring always gets through.

use governor::clock::{Clock, DefaultClock};
use governor::{Quota, RateLimiter as Gcra};
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

/// `[ratelimit]` settings.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default)]
pub struct RateLimitConfig {
    /// Off unless enabled.
    pub enabled: bool,
    /// Refill rate per client IP.
    pub requests_per_second: f64,
    /// Bucket size.
    pub burst: u32,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            requests_per_second: 10.0,
            burst: 50,
        }
    }
}

/// The limiter.
pub struct RateLimiter {
    gcra: Gcra<IpAddr, governor::state::keyed::DefaultKeyedStateStore<IpAddr>, DefaultClock>,
    clock: DefaultClock,
}

impl RateLimiter {
    /// A limiter for `cfg`, or `None` when disabled. Errors on nonsense values.
    pub fn from_config(cfg: &RateLimitConfig) -> Result<Option<Self>, String> {
        if !cfg.enabled {
            return Ok(None);
        }
        if !(cfg.requests_per_second.is_finite() && cfg.requests_per_second > 0.0) {
            return Err("[ratelimit] requests_per_second must be a positive number".into());
        }
        let burst = NonZeroU32::new(cfg.burst)
            .ok_or_else(|| "[ratelimit] burst must be at least 1".to_string())?;
        let period = Duration::from_secs_f64(1.0 / cfg.requests_per_second);
        let quota = Quota::with_period(period)
            .ok_or_else(|| "[ratelimit] requests_per_second is too large".to_string())?
            .allow_burst(burst);
        Ok(Some(Self {
            gcra: Gcra::keyed(quota),
            clock: DefaultClock::default(),
        }))
    }

    /// `Ok` when `ip` may proceed, else how long to wait.
    pub fn check(&self, ip: IpAddr) -> Result<(), Duration> {
        let ip = client_key(ip);
        // Forget idle clients now and then so the table stays small.
        if self.gcra.len() > 10_000 {
            self.gcra.retain_recent();
        }
        self.gcra
            .check_key(&ip)
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }
}

/// The identity of a client address for per-client limits (rate limiting,
/// login throttling, the connection cap): an IPv4 address as is (also when it
/// arrives IPv4-mapped), an IPv6 address by its /64 — one subscriber's
/// network, where a client may rotate through 2^64 addresses at will.
pub fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// Paths never limited.
pub fn exempt(path: &str) -> bool {
    matches!(path, "/health" | "/metrics")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_empties_the_bucket_and_says_when_to_retry() {
        let l = RateLimiter::from_config(&RateLimitConfig {
            enabled: true,
            requests_per_second: 1.0,
            burst: 3,
        })
        .unwrap()
        .unwrap();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        for _ in 0..3 {
            assert!(l.check(a).is_ok());
        }
        let wait = l.check(a).unwrap_err();
        assert!(wait > Duration::from_millis(500) && wait <= Duration::from_secs(1));
        assert!(l.check(b).is_ok(), "buckets are per address");
    }

    #[test]
    fn ipv6_clients_are_one_client_per_64() {
        let a = client_key("2001:db8:1:2:aaaa::1".parse().unwrap());
        let b = client_key("2001:db8:1:2:ffff:1:2:3".parse().unwrap());
        let c = client_key("2001:db8:1:3::1".parse().unwrap());
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(
            client_key("::ffff:192.0.2.7".parse().unwrap()),
            "192.0.2.7".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            client_key("192.0.2.7".parse().unwrap()),
            "192.0.2.7".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn disabled_or_invalid_settings() {
        assert!(
            RateLimiter::from_config(&RateLimitConfig::default())
                .unwrap()
                .is_none()
        );
        let bad = RateLimitConfig {
            enabled: true,
            requests_per_second: 0.0,
            burst: 1,
        };
        assert!(RateLimiter::from_config(&bad).is_err());
    }
}
