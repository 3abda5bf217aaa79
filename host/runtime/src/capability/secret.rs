//! Secrets bound to hosts and headers.
//!
//! A `secrets` entry names a host-held secret and where its value may go: the
//! hosts it may be sent to and the header names it may appear in. The host
//! substitutes a secret reference only in such a header of a request to such
//! a host; anywhere else the request is denied. That closes the hole where a
//! plugin granted a secret and a host put the reference into a header of its
//! own choosing (`X-Leak`), or sent it to a second granted host.
//!
//! Both forms are accepted on both sides (manifest request and operator
//! grant):
//!
//! ```toml
//! secrets = ["api_key"]                       # bare: defaults below
//! secrets = [{ name = "GITHUB_TOKEN", hosts = ["api.github.com"], header = "authorization" }]
//! ```
//!
//! An empty `hosts` means "the named `http` hosts of the same side" (never
//! `<public>`), and headers default to what the other side says, else
//! `authorization`.

use super::{CapabilityKind, CapabilityParseError, HostRule};
use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// The header a bare secret entry may be sent in.
pub const DEFAULT_SECRET_HEADER: &str = "authorization";

/// One `secrets` entry: a secret's name and where its value may be sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretGrant {
    /// The secret's name (`<configured>` in a provider, channel or tool
    /// manifest: whatever names the operator grants).
    pub name: String,
    /// Hosts the value may be sent to (`host`, `host:port`, `*.domain`; a
    /// manifest may say `<configured>`). Empty: this side's named `http`
    /// hosts.
    pub hosts: Vec<String>,
    /// Header names the value may appear in, lower-cased. Empty: the other
    /// side's, else [`DEFAULT_SECRET_HEADER`].
    pub headers: Vec<String>,
}

impl SecretGrant {
    /// A bare entry: the name with the default binding.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            hosts: Vec::new(),
            headers: Vec::new(),
        }
    }

    /// Whether the entry is the bare (string) form.
    pub fn is_bare(&self) -> bool {
        self.hosts.is_empty() && self.headers.is_empty()
    }

    /// Checks the host and header lists (the name is checked by the caller
    /// with the other name lists).
    pub(super) fn validate(&self, allow_configured: bool) -> Result<(), CapabilityParseError> {
        for h in &self.hosts {
            match HostRule::parse(h, allow_configured)? {
                HostRule::Public => {
                    return Err(CapabilityParseError::PublicSecretHost(self.name.clone()));
                }
                HostRule::Pattern(_) | HostRule::Configured => {}
            }
        }
        for h in &self.headers {
            if http::HeaderName::from_bytes(h.as_bytes()).is_err() || h.len() > 128 {
                return Err(CapabilityParseError::BadName {
                    kind: CapabilityKind::Secret,
                    name: format!("{}: header {h:?}", self.name),
                });
            }
        }
        Ok(())
    }
}

impl From<&str> for SecretGrant {
    fn from(name: &str) -> Self {
        Self::named(name)
    }
}

impl From<String> for SecretGrant {
    fn from(name: String) -> Self {
        Self::named(name)
    }
}

/// Prints the TOML form: the bare name, or `name → hosts [headers]`.
impl fmt::Display for SecretGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if !self.hosts.is_empty() {
            write!(f, " to {}", self.hosts.join(", "))?;
        }
        if !self.headers.is_empty() {
            write!(f, " in {}", self.headers.join(", "))?;
        }
        Ok(())
    }
}

impl Serialize for SecretGrant {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.is_bare() {
            return s.serialize_str(&self.name);
        }
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("name", &self.name)?;
        if !self.hosts.is_empty() {
            map.serialize_entry("hosts", &self.hosts)?;
        }
        match self.headers.as_slice() {
            [] => {}
            [one] => map.serialize_entry("header", one)?,
            many => map.serialize_entry("header", many)?,
        }
        map.end()
    }
}

/// `header = "x"` or `header = ["x", "y"]`.
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretTable {
    name: String,
    #[serde(default)]
    hosts: Vec<String>,
    /// Present means a string or a list: `null` is a type error like any
    /// other, not "absent" (an API body must not pass with a wrong type).
    #[serde(default, deserialize_with = "present_header")]
    header: Option<OneOrMany>,
}

fn present_header<'de, D: Deserializer<'de>>(d: D) -> Result<Option<OneOrMany>, D::Error> {
    OneOrMany::deserialize(d)
        .map(Some)
        .map_err(|_| de::Error::custom("`header` must be a header name or a list of header names"))
}

impl<'de> Deserialize<'de> for SecretGrant {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct EntryVisitor;
        impl<'de> Visitor<'de> for EntryVisitor {
            type Value = SecretGrant;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a secret name, or a table { name = \"...\", hosts = [\"...\"], header = \"...\" }",
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<SecretGrant, E> {
                Ok(SecretGrant::named(v))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<SecretGrant, A::Error> {
                let t = SecretTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                let headers = match t.header {
                    None => Vec::new(),
                    Some(OneOrMany::One(h)) => vec![h],
                    Some(OneOrMany::Many(v)) => v,
                };
                Ok(SecretGrant {
                    name: t.name,
                    hosts: t.hosts,
                    headers: headers.iter().map(|h| h.to_ascii_lowercase()).collect(),
                })
            }
        }
        d.deserialize_any(EntryVisitor)
    }
}

/// Where one effective secret may go: the request's and the grant's host
/// rules (each empty: that side's named `http` hosts) and the header names
/// both sides allow.
#[derive(Debug, Clone, Default)]
pub(super) struct SecretBinding {
    pub(super) name: String,
    pub(super) requested_hosts: Vec<HostRule>,
    pub(super) granted_hosts: Vec<HostRule>,
    pub(super) headers: Vec<String>,
}

impl SecretBinding {
    /// The binding for `grant` under the manifest's `requested` entries, if
    /// the manifest asks for the secret at all (by name or `<configured>`).
    pub(super) fn new(requested: &[SecretGrant], grant: &SecretGrant) -> Option<Self> {
        let req = requested
            .iter()
            .find(|r| r.name == grant.name)
            .or_else(|| {
                requested
                    .iter()
                    .find(|r| r.name == HostRule::CONFIGURED_SPELLING)
            })?;
        let headers = match (req.headers.is_empty(), grant.headers.is_empty()) {
            (true, true) => vec![DEFAULT_SECRET_HEADER.to_string()],
            (false, true) => req.headers.clone(),
            (true, false) => grant.headers.clone(),
            (false, false) => grant
                .headers
                .iter()
                .filter(|h| req.headers.contains(h))
                .cloned()
                .collect(),
        };
        let rules = |hosts: &[String], allow_configured| {
            hosts
                .iter()
                .filter_map(|h| HostRule::parse(h, allow_configured).ok())
                .filter(|r| *r != HostRule::Public)
                .collect::<Vec<_>>()
        };
        Some(Self {
            name: grant.name.clone(),
            requested_hosts: rules(&req.hosts, true),
            granted_hosts: rules(&grant.hosts, false),
            headers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Serialize, PartialEq, Debug)]
    struct Doc {
        secrets: Vec<SecretGrant>,
    }

    #[test]
    fn both_forms_parse_and_round_trip() {
        let doc: Doc = toml::from_str(
            r#"secrets = ["api_key", { name = "GH", hosts = ["api.github.com"], header = "Authorization" },
                          { name = "K", header = ["x-api-key", "authorization"] }]"#,
        )
        .unwrap();
        assert_eq!(doc.secrets[0], SecretGrant::named("api_key"));
        assert_eq!(doc.secrets[1].hosts, ["api.github.com"]);
        assert_eq!(doc.secrets[1].headers, ["authorization"], "lower-cased");
        assert_eq!(doc.secrets[2].headers, ["x-api-key", "authorization"]);
        let json = serde_json::to_value(&doc).unwrap();
        assert_eq!(json["secrets"][0], "api_key");
        assert_eq!(json["secrets"][1]["header"], "authorization");
        let back: Doc = serde_json::from_value(json).unwrap();
        assert_eq!(back, doc);
    }

    #[test]
    fn unknown_keys_and_bad_shapes_are_errors() {
        let err = toml::from_str::<Doc>(r#"secrets = [{ name = "A", host = "x" }]"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `host`"), "{err}");
        let err = serde_json::from_str::<Doc>(r#"{"secrets": [{"name": "A", "header": null}]}"#)
            .unwrap_err();
        assert!(
            err.to_string().contains("`header` must be a header name"),
            "{err}"
        );
        let err = toml::from_str::<Doc>("secrets = [1]").unwrap_err();
        assert!(
            err.to_string().contains("a secret name, or a table"),
            "{err}"
        );
    }

    #[test]
    fn validation_refuses_public_hosts_and_bad_headers() {
        let g = SecretGrant {
            name: "A".into(),
            hosts: vec!["<public>".into()],
            headers: vec![],
        };
        assert_eq!(
            g.validate(false),
            Err(CapabilityParseError::PublicSecretHost("A".into()))
        );
        let g = SecretGrant {
            name: "A".into(),
            hosts: vec![],
            headers: vec!["bad header".into()],
        };
        assert!(g.validate(false).is_err());
        let g = SecretGrant {
            name: "A".into(),
            hosts: vec!["<configured>".into()],
            headers: vec![],
        };
        assert!(g.validate(false).is_err(), "a grant names concrete hosts");
        assert!(g.validate(true).is_ok());
    }

    #[test]
    fn headers_are_what_both_sides_allow() {
        let bare = SecretGrant::named("A");
        let with = |h: &[&str]| SecretGrant {
            name: "A".into(),
            hosts: vec![],
            headers: h.iter().map(|s| s.to_string()).collect(),
        };
        let b = SecretBinding::new(std::slice::from_ref(&bare), &bare).unwrap();
        assert_eq!(b.headers, ["authorization"]);
        let b = SecretBinding::new(&[with(&["x-api-key"])], &bare).unwrap();
        assert_eq!(b.headers, ["x-api-key"]);
        let b = SecretBinding::new(
            &[with(&["x-api-key", "authorization"])],
            &with(&["authorization"]),
        )
        .unwrap();
        assert_eq!(b.headers, ["authorization"]);
        let b = SecretBinding::new(&[with(&["x-leak"])], &with(&["authorization"])).unwrap();
        assert!(b.headers.is_empty(), "no header both sides allow");
        assert!(SecretBinding::new(&[SecretGrant::named("B")], &bare).is_none());
        let configured = SecretGrant::named("<configured>");
        assert!(SecretBinding::new(&[configured], &bare).is_some());
    }
}
