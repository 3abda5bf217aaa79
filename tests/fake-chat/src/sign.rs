//! Request signing for the platforms' HTTP (webhook) modes:
//! Slack `v0` HMAC-SHA256 (channels-wire.md B6) and Discord Ed25519 (A9).

use ed25519_dalek::{Signer, SigningKey};
use sha2::Sha256;

/// HMAC-SHA256 (RFC 2104) of `msg` under `key` (the `hmac` crate over
/// the workspace's `sha2`).
pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    use hmac::{Mac, digest::KeyInit};
    // HMAC takes keys of any length; `new_from_slice` cannot fail for it.
    let Ok(mut mac) = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(key) else {
        return [0; 32];
    };
    mac.update(msg);
    mac.finalize().into_bytes().into()
}

/// Slack's request signature: `"v0=" + hex(HMAC-SHA256(signing_secret,
/// "v0:{ts}:{body}"))`, the `X-Slack-Signature` header value for
/// `X-Slack-Request-Timestamp: ts`.
pub fn slack_signature(signing_secret: &str, ts: i64, body: &[u8]) -> String {
    let mut msg = format!("v0:{ts}:").into_bytes();
    msg.extend_from_slice(body);
    format!(
        "v0={}",
        hex::encode(hmac_sha256(signing_secret.as_bytes(), &msg))
    )
}

/// Discord's interaction signature: hex of the Ed25519 signature over
/// `ts + body` (the `X-Signature-Ed25519` header for
/// `X-Signature-Timestamp: ts`).
pub fn discord_sign(signing_key: &SigningKey, ts: &str, body: &[u8]) -> String {
    let mut msg = Vec::with_capacity(ts.len() + body.len());
    msg.extend_from_slice(ts.as_bytes());
    msg.extend_from_slice(body);
    hex::encode(signing_key.sign(&msg).to_bytes())
}

/// A fixed test signing key (from constant bytes, no RNG).
pub fn discord_test_key() -> SigningKey {
    SigningKey::from_bytes(&[0x42; 32])
}

/// The hex public key of `signing_key`, as the Discord developer portal
/// shows it (what an adapter is configured with).
pub fn discord_public_key_hex(signing_key: &SigningKey) -> String {
    hex::encode(signing_key.verifying_key().to_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signature, Verifier};

    #[test]
    fn hmac_matches_rfc4231_case_2() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn hmac_hashes_long_keys() {
        // RFC 4231 test case 6: a 131-byte key.
        let key = [0xaau8; 131];
        let mac = hmac_sha256(
            &key,
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        );
        assert_eq!(
            hex::encode(mac),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn slack_signature_matches_the_documented_example() {
        let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        assert_eq!(
            slack_signature(
                "8f742231b10e8888abcd99yyyzzz85a5",
                1531420618,
                body.as_bytes()
            ),
            "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
        );
    }

    #[test]
    fn discord_signature_verifies() {
        let key = discord_test_key();
        let sig = discord_sign(&key, "1700000000", br#"{"type":1}"#);
        let bytes: [u8; 64] = hex::decode(&sig).unwrap().try_into().unwrap();
        let msg = b"1700000000{\"type\":1}";
        assert!(
            key.verifying_key()
                .verify(msg, &Signature::from_bytes(&bytes))
                .is_ok()
        );
        assert_eq!(discord_public_key_hex(&key).len(), 64);
    }
}
