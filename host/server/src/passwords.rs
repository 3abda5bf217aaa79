//! Password hashing (Argon2id, PHC strings) and login-name rules, shared by the
//! server's setup/login and the offline `turnstone admin`.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use password_hash::rand_core::OsRng;

/// Shortest accepted password.
pub const MIN_PASSWORD_CHARS: usize = 8;

/// Hashes a password with Argon2id and a random salt.
pub fn hash(password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut OsRng);
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| format!("hashing the password failed: {e}"))
}

/// Whether `password` matches the stored PHC `hash` (false for a malformed hash).
pub fn verify(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|parsed| {
        argon2::Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
}

/// A valid hash of a random password, for timing-safe failed logins.
pub fn dummy_hash() -> String {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DUMMY
        .get_or_init(|| hash("turnstone-dummy-password").unwrap_or_default())
        .clone()
}

/// Argon2id off the async workers: every hash or verification runs on the
/// blocking pool behind a small semaphore, so a flood of logins can use at
/// most half the cores and never stalls request handling. Callers beyond
/// the queue bound are refused at once instead of piling up.
pub struct PasswordPool {
    permits: tokio::sync::Semaphore,
    queued: std::sync::atomic::AtomicUsize,
    max_queued: usize,
}

/// The pool is saturated: answer 503 and let the client retry.
#[derive(Debug, thiserror::Error)]
#[error("the server is busy checking passwords; try again in a moment")]
pub struct PoolBusy;

impl Default for PasswordPool {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self::new((cores / 2).max(1), 64)
    }
}

impl PasswordPool {
    /// A pool running at most `parallel` hashes at once with `max_queued`
    /// callers waiting.
    pub fn new(parallel: usize, max_queued: usize) -> Self {
        Self {
            permits: tokio::sync::Semaphore::new(parallel.max(1)),
            queued: Default::default(),
            max_queued,
        }
    }

    async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, PoolBusy> {
        use std::sync::atomic::Ordering;
        if self.queued.fetch_add(1, Ordering::AcqRel) >= self.max_queued {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(PoolBusy);
        }
        let permit = self.permits.acquire().await;
        self.queued.fetch_sub(1, Ordering::AcqRel);
        let _permit = permit.map_err(|_| PoolBusy)?;
        tokio::task::spawn_blocking(job).await.map_err(|_| PoolBusy)
    }

    /// [`verify`] on the pool; without a stored hash (unknown user) against
    /// [`dummy_hash`], so both take the same time.
    pub async fn verify(&self, password: String, hash: Option<String>) -> Result<bool, PoolBusy> {
        self.run(move || {
            let real = hash.is_some();
            let hash = hash.unwrap_or_else(dummy_hash);
            verify(&password, &hash) && real
        })
        .await
    }

    /// [`hash`] on the pool.
    pub async fn hash(&self, password: String) -> Result<Result<String, String>, PoolBusy> {
        self.run(move || hash(&password)).await
    }
}

/// Checks a login name: 1-64 of letters, digits, `.`, `_`, `-`.
pub fn validate_username(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "username {name:?} is invalid: use 1-64 letters, digits, '.', '_' or '-'"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_are_salted() {
        let a = hash("correct horse").unwrap();
        let b = hash("correct horse").unwrap();
        assert!(a.starts_with("$argon2id$") && a != b, "random salt");
        assert!(verify("correct horse", &a));
        assert!(!verify("correct hors", &a));
        assert!(!verify("x", "not a phc string"));
        assert!(!verify("turnstone", &dummy_hash()));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_pool_bounds_parallelism_and_refuses_beyond_its_queue() {
        let pool = std::sync::Arc::new(PasswordPool::new(1, 2));
        let h = hash("pw-12345678").unwrap();
        assert!(
            pool.verify("pw-12345678".into(), Some(h.clone()))
                .await
                .unwrap()
        );
        assert!(!pool.verify("nope".into(), Some(h.clone())).await.unwrap());
        assert!(
            !pool
                .verify("turnstone-dummy-password".into(), None)
                .await
                .unwrap()
        );
        // One running + two queued fit; the fourth concurrent caller is refused.
        let calls: Vec<_> = (0..4)
            .map(|_| {
                let (pool, h) = (pool.clone(), h.clone());
                tokio::spawn(async move { pool.verify("x".into(), Some(h)).await })
            })
            .collect();
        let mut busy = 0;
        for c in calls {
            if c.await.unwrap().is_err() {
                busy += 1;
            }
        }
        assert!(busy >= 1, "a caller beyond the queue is refused");
        assert!(pool.hash("another-pw".into()).await.unwrap().is_ok());
    }

    #[test]
    fn usernames() {
        assert!(validate_username("alice.b-c_1").is_ok());
        for bad in ["", "a b", "ä", &"x".repeat(65), "a/b"] {
            assert!(validate_username(bad).is_err(), "{bad}");
        }
    }
}
