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

    #[test]
    fn usernames() {
        assert!(validate_username("alice.b-c_1").is_ok());
        for bad in ["", "a b", "ä", &"x".repeat(65), "a/b"] {
            assert!(validate_username(bad).is_err(), "{bad}");
        }
    }
}
