//! Signed plugins: an ed25519 signature over a component's sha256 and its
//! manifest's sha256, kept beside them as `plugin.sig`. With
//! `[plugins] require_signatures = true` a third-party plugin loads (at
//! start, on hot reload and on install) only when its signature verifies
//! under one of `[plugins] trusted_keys`; built-ins are trusted by their
//! install path (the binary's own `components/` directory).
//!
//! ```toml
//! # plugin.sig
//! algorithm = "ed25519"
//! public_key = "ed25519:…"        # the signer
//! component_sha256 = "…"          # what was signed
//! manifest_sha256 = "…"
//! signature = "…"                 # base64, over the message below
//! ```
//!
//! The signed message is `turnstone-plugin-signature/v1\n` followed by the
//! component's and the manifest's sha256 in hex, one per line.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signature, Signer, Verifier};
pub use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

/// The signature file's name, beside `plugin.toml`.
pub const SIGNATURE_FILE: &str = "plugin.sig";
/// How public keys are written: `ed25519:` + base64 of the 32 bytes.
const KEY_PREFIX: &str = "ed25519:";
/// How private keys are written (the 32-byte seed).
const PRIVATE_PREFIX: &str = "ed25519-private:";

/// Why a plugin's signature does not hold.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SignatureError {
    /// No `plugin.sig` beside the manifest.
    #[error("unsigned: no {SIGNATURE_FILE} (sign it with `turnstone plugins sign`)")]
    Missing,
    /// The file or a key is not readable.
    #[error("malformed signature: {0}")]
    Malformed(String),
    /// The component or manifest changed after signing.
    #[error("tampered: the {0} does not match what was signed")]
    Tampered(&'static str),
    /// The signature does not verify under its key.
    #[error("the signature does not verify")]
    BadSignature,
    /// Signed by a key the operator does not trust.
    #[error("signed by {0}, which is not in [plugins] trusted_keys")]
    Untrusted(String),
}

/// `plugin.sig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureFile {
    /// Always `ed25519`.
    pub algorithm: String,
    /// The signer's public key (`ed25519:…`).
    pub public_key: String,
    /// sha256 of the component, hex.
    pub component_sha256: String,
    /// sha256 of `plugin.toml`, hex.
    pub manifest_sha256: String,
    /// The signature, base64.
    pub signature: String,
}

fn sha_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn message(component_sha256: &str, manifest_sha256: &str) -> Vec<u8> {
    format!("turnstone-plugin-signature/v1\n{component_sha256}\n{manifest_sha256}\n").into_bytes()
}

/// The text form of a public key.
pub fn public_key_string(k: &VerifyingKey) -> String {
    format!("{KEY_PREFIX}{}", B64.encode(k.as_bytes()))
}

/// Parses `ed25519:<base64>`.
pub fn parse_public_key(s: &str) -> Result<VerifyingKey, SignatureError> {
    let b64 = s.trim().strip_prefix(KEY_PREFIX).ok_or_else(|| {
        SignatureError::Malformed(format!("public key {s:?} does not start with {KEY_PREFIX}"))
    })?;
    let bytes = B64
        .decode(b64)
        .map_err(|e| SignatureError::Malformed(format!("public key {s:?}: {e}")))?;
    let arr: [u8; 32] = bytes
        .try_into()
        .map_err(|_| SignatureError::Malformed(format!("public key {s:?} is not 32 bytes")))?;
    VerifyingKey::from_bytes(&arr)
        .map_err(|e| SignatureError::Malformed(format!("public key {s:?}: {e}")))
}

/// A new private key, as the text a key file holds.
pub fn generate_private_key() -> Result<String, SignatureError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed)
        .map_err(|e| SignatureError::Malformed(format!("no randomness for a key: {e}")))?;
    Ok(format!("{PRIVATE_PREFIX}{}\n", B64.encode(seed)))
}

/// Parses a key file's text.
pub fn parse_private_key(text: &str) -> Result<SigningKey, SignatureError> {
    let b64 = text.trim().strip_prefix(PRIVATE_PREFIX).ok_or_else(|| {
        SignatureError::Malformed(format!("a private key file starts with {PRIVATE_PREFIX}"))
    })?;
    let bytes = B64
        .decode(b64)
        .map_err(|e| SignatureError::Malformed(format!("private key: {e}")))?;
    let seed: [u8; 32] = bytes
        .try_into()
        .map_err(|_| SignatureError::Malformed("private key is not 32 bytes".into()))?;
    Ok(SigningKey::from_bytes(&seed))
}

/// Signs a plugin's manifest and component.
pub fn sign(key: &SigningKey, manifest: &[u8], component: &[u8]) -> SignatureFile {
    let (c, m) = (sha_hex(component), sha_hex(manifest));
    let sig = key.sign(&message(&c, &m));
    SignatureFile {
        algorithm: "ed25519".into(),
        public_key: public_key_string(&key.verifying_key()),
        component_sha256: c,
        manifest_sha256: m,
        signature: B64.encode(sig.to_bytes()),
    }
}

/// Checks `sig` (the text of `plugin.sig`, `None` when absent) over
/// `manifest` and `component`; with `trusted` given, the signer must be one
/// of them. Returns the signer.
pub fn verify(
    sig: Option<&str>,
    manifest: &[u8],
    component: &[u8],
    trusted: Option<&[VerifyingKey]>,
) -> Result<VerifyingKey, SignatureError> {
    let text = sig.ok_or(SignatureError::Missing)?;
    let file: SignatureFile =
        toml::from_str(text).map_err(|e| SignatureError::Malformed(e.message().to_string()))?;
    if file.algorithm != "ed25519" {
        return Err(SignatureError::Malformed(format!(
            "algorithm {:?} (only ed25519)",
            file.algorithm
        )));
    }
    let key = parse_public_key(&file.public_key)?;
    if file.component_sha256 != sha_hex(component) {
        return Err(SignatureError::Tampered("component"));
    }
    if file.manifest_sha256 != sha_hex(manifest) {
        return Err(SignatureError::Tampered("manifest (plugin.toml)"));
    }
    let bytes = B64
        .decode(&file.signature)
        .map_err(|e| SignatureError::Malformed(format!("signature: {e}")))?;
    let sig = Signature::from_slice(&bytes)
        .map_err(|e| SignatureError::Malformed(format!("signature: {e}")))?;
    key.verify(
        &message(&file.component_sha256, &file.manifest_sha256),
        &sig,
    )
    .map_err(|_| SignatureError::BadSignature)?;
    if let Some(trusted) = trusted
        && !trusted.contains(&key)
    {
        return Err(SignatureError::Untrusted(public_key_string(&key)));
    }
    Ok(key)
}

/// The operator's signature policy (`[plugins] require_signatures`,
/// `trusted_keys`).
#[derive(Debug, Clone, Default)]
pub struct SignaturePolicy {
    /// Refuse third-party plugins without a trusted signature.
    pub required: bool,
    /// The keys a signature must be made with.
    pub trusted: Vec<VerifyingKey>,
}

impl SignaturePolicy {
    /// The policy of a config; a bad key is an error naming it.
    pub fn new(required: bool, trusted_keys: &[String]) -> Result<Self, SignatureError> {
        Ok(Self {
            required,
            trusted: trusted_keys
                .iter()
                .map(|k| parse_public_key(k))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Whether a third-party plugin with these files may load: always when
    /// signatures are not required.
    pub fn check(
        &self,
        builtin: bool,
        sig: Option<&str>,
        manifest: &[u8],
        component: &[u8],
    ) -> Result<(), SignatureError> {
        if !self.required || builtin {
            return Ok(());
        }
        verify(sig, manifest, component, Some(&self.trusted)).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_and_any_flipped_byte_breaks_it() {
        let key = parse_private_key(&generate_private_key().unwrap()).unwrap();
        let (m, c) = (
            b"[plugin]\nname = \"x\"\n".to_vec(),
            b"\0asm\x01\0\0\0xyz".to_vec(),
        );
        let file = sign(&key, &m, &c);
        let text = toml::to_string(&file).unwrap();
        let pk = key.verifying_key();
        assert_eq!(verify(Some(&text), &m, &c, Some(&[pk])).unwrap(), pk);
        let mut c2 = c.clone();
        c2[9] ^= 1;
        assert_eq!(
            verify(Some(&text), &m, &c2, None),
            Err(SignatureError::Tampered("component"))
        );
        let mut m2 = m.clone();
        m2[3] ^= 1;
        assert!(matches!(
            verify(Some(&text), &m2, &c, None),
            Err(SignatureError::Tampered(_))
        ));
        // A signature copied from another plugin does not verify.
        let other = sign(&key, b"other", b"other");
        let forged = SignatureFile {
            signature: other.signature,
            ..file.clone()
        };
        assert_eq!(
            verify(Some(&toml::to_string(&forged).unwrap()), &m, &c, None),
            Err(SignatureError::BadSignature)
        );
        let stranger = parse_private_key(&generate_private_key().unwrap())
            .unwrap()
            .verifying_key();
        assert!(matches!(
            verify(Some(&text), &m, &c, Some(&[stranger])),
            Err(SignatureError::Untrusted(_))
        ));
        assert_eq!(verify(None, &m, &c, None), Err(SignatureError::Missing));
        assert!(matches!(
            verify(Some("not toml ="), &m, &c, None),
            Err(SignatureError::Malformed(_))
        ));
    }

    #[test]
    fn keys_round_trip_and_bad_ones_are_named() {
        let key = parse_private_key(&generate_private_key().unwrap()).unwrap();
        let s = public_key_string(&key.verifying_key());
        assert_eq!(parse_public_key(&s).unwrap(), key.verifying_key());
        let e = SignaturePolicy::new(true, &["rsa:abc".into()]).unwrap_err();
        assert!(e.to_string().contains("rsa:abc"), "{e}");
        let p = SignaturePolicy::new(false, &[]).unwrap();
        assert!(p.check(false, None, b"", b"").is_ok(), "not required");
        let p = SignaturePolicy::new(true, &[s]).unwrap();
        assert!(
            p.check(true, None, b"", b"").is_ok(),
            "built-ins are trusted by path"
        );
        assert_eq!(p.check(false, None, b"", b""), Err(SignatureError::Missing));
    }
}
