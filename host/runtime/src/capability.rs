//! Two-sided capabilities: what a plugin's manifest requests, what the operator
//! grants, and the effective set (their intersection) enforced at the host boundary.

use serde::{Deserialize, Serialize};
use std::path::{Component, Path, PathBuf};
use thiserror::Error;

/// Manifest-only `http` entry of provider and channel plugins: "whatever host
/// the operator configures for me". It never matches by itself; the operator's
/// concrete grant (e.g. a model alias's base URL host) decides.
pub const CONFIGURED_HOSTS: &str = "<configured>";

/// HTTP grant meaning "any host whose addresses are all public": every request
/// (so every redirect hop) is resolved and screened by the host's SSRF guard
/// ([`crate::netguard`]). Valid in manifests and grants.
pub const PUBLIC_HOSTS: &str = "<public>";

/// How an allowed HTTP request must be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpAccess {
    /// An explicitly granted host: sent as is.
    Granted,
    /// Allowed only through the SSRF guard (`<public>`).
    PublicOnly,
}

/// Access mode of a filesystem grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Read only.
    #[serde(alias = "ro")]
    ReadOnly,
    /// Read and write.
    #[serde(alias = "rw")]
    ReadWrite,
}

impl Access {
    /// Short form used in grant hints and listings.
    pub fn short(self) -> &'static str {
        match self {
            Access::ReadOnly => "ro",
            Access::ReadWrite => "rw",
        }
    }
}

/// Where a filesystem grant points: the configured workspace (or a directory
/// inside it), or an absolute host path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsGrant {
    /// `"workspace"`, `"workspace/<sub>"` or an absolute path.
    pub path: String,
    /// Access mode.
    pub access: Access,
}

/// A set of capabilities, used both for manifest requests and operator grants.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capabilities {
    /// Filesystem paths.
    #[serde(default)]
    pub filesystem: Vec<FsGrant>,
    /// Outbound HTTP hosts: `host`, `host:port` or `*.domain`.
    #[serde(default)]
    pub http: Vec<String>,
    /// Programs the plugin may spawn (by name).
    #[serde(default)]
    pub exec: Vec<String>,
    /// Environment variable names the plugin may set on children.
    #[serde(default)]
    pub env: Vec<String>,
    /// Names of host-held secrets the plugin may reference.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// May ask the calling session's model for a completion (`model` interface).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub model: bool,
}

/// A capability set that is malformed or dangerously broad.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CapabilityParseError {
    /// A host pattern that would allow everything or cannot be parsed.
    #[error(
        "http grant {0:?} is not allowed: name a host, host:port or *.domain (a bare \"*\" would allow every host)"
    )]
    BadHost(String),
    /// A filesystem path that is relative (other than the workspace forms) or escapes.
    #[error(
        "filesystem grant {0:?} must be \"workspace\", \"workspace/<dir>\" or an absolute path without \"..\""
    )]
    BadPath(String),
    /// A program, variable or secret name that is empty or contains odd characters.
    #[error("{kind} name {name:?} is invalid")]
    BadName {
        /// Which list the name is in.
        kind: &'static str,
        /// The offending name.
        name: String,
    },
}

impl Capabilities {
    /// Rejects footgun forms at parse time (an empty allowlist denies everything;
    /// a `*` never means "everything").
    pub fn validate(&self) -> Result<(), CapabilityParseError> {
        self.validate_with(false)
    }

    /// Like [`Capabilities::validate`]; `allow_configured` permits the
    /// [`CONFIGURED_HOSTS`] request form (provider and channel manifests only).
    pub fn validate_with(&self, allow_configured: bool) -> Result<(), CapabilityParseError> {
        for h in &self.http {
            if (allow_configured && h == CONFIGURED_HOSTS) || h == PUBLIC_HOSTS {
                continue;
            }
            HostPattern::parse(h)?;
        }
        for g in &self.filesystem {
            parse_fs_path(&g.path)?;
        }
        for (kind, list) in [
            ("exec", &self.exec),
            ("env", &self.env),
            ("secret", &self.secrets),
        ] {
            for name in list {
                let ok = !name.is_empty()
                    && name.len() <= 256
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c));
                if !ok || name == "*" {
                    return Err(CapabilityParseError::BadName {
                        kind,
                        name: name.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// True when nothing is requested or granted.
    pub fn is_empty(&self) -> bool {
        self.filesystem.is_empty()
            && self.http.is_empty()
            && self.exec.is_empty()
            && self.env.is_empty()
            && self.secrets.is_empty()
            && !self.model
    }
}

/// Parsed form of a filesystem grant path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FsRoot {
    Workspace(PathBuf),
    Absolute(PathBuf),
}

fn parse_fs_path(raw: &str) -> Result<FsRoot, CapabilityParseError> {
    let bad = || CapabilityParseError::BadPath(raw.to_string());
    let (root, rel) = if raw == "workspace" {
        return Ok(FsRoot::Workspace(PathBuf::new()));
    } else if let Some(rest) = raw.strip_prefix("workspace/") {
        (true, Path::new(rest))
    } else if Path::new(raw).is_absolute() {
        (false, Path::new(raw))
    } else {
        return Err(bad());
    };
    if rel.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(bad());
    }
    Ok(if root {
        FsRoot::Workspace(rel.to_path_buf())
    } else {
        FsRoot::Absolute(rel.to_path_buf())
    })
}

/// An allowed outbound host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// Lower-cased host; with `wildcard`, the domain suffix.
    host: String,
    wildcard: bool,
    port: Option<u16>,
}

impl HostPattern {
    /// Parses `host`, `host:port`, `*.domain`, `[v6]:port`.
    pub fn parse(raw: &str) -> Result<Self, CapabilityParseError> {
        let bad = || CapabilityParseError::BadHost(raw.to_string());
        let s = raw.trim().to_ascii_lowercase();
        let s = s
            .strip_prefix("https://")
            .or_else(|| s.strip_prefix("http://"))
            .unwrap_or(&s)
            .trim_end_matches('/');
        if s.is_empty() || s == "*" || s.contains('/') {
            return Err(bad());
        }
        let (host, port) = split_host_port(s).ok_or_else(bad)?;
        let (host, wildcard) = match host.strip_prefix("*.") {
            Some(rest) => (rest.to_string(), true),
            None => (host.to_string(), false),
        };
        let host_chars_ok = if host.starts_with('[') {
            host[1..host.len() - 1]
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
        } else {
            host.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        };
        if host.is_empty() || !host_chars_ok {
            return Err(bad());
        }
        Ok(Self {
            host,
            wildcard,
            port,
        })
    }

    /// Whether a request to `host:port` matches.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        let host = host.to_ascii_lowercase();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let host_ok = if self.wildcard {
            host.len() > self.host.len()
                && host.ends_with(&self.host)
                && host.as_bytes()[host.len() - self.host.len() - 1] == b'.'
        } else {
            host == self.host.trim_start_matches('[').trim_end_matches(']')
        };
        host_ok && self.port.is_none_or(|p| p == port)
    }
}

fn split_host_port(s: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = s.strip_prefix('[') {
        let end = rest.find(']')?;
        let host = &s[..end + 2];
        let tail = &rest[end + 1..];
        return match tail.strip_prefix(':') {
            Some(p) => Some((host, Some(p.parse().ok()?))),
            None if tail.is_empty() => Some((host, None)),
            None => None,
        };
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => Some((h, Some(p.parse().ok()?))),
        Some(_) => None,
        None => Some((s, None)),
    }
}

/// A concrete directory the plugin may access, resolved against the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedDir {
    /// Absolute, canonical host path.
    pub path: PathBuf,
    /// Effective access.
    pub access: Access,
}

/// A capability the plugin tried to use without holding it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{capability} denied for plugin {plugin:?}: {detail}; {hint}")]
pub struct Denial {
    /// Plugin name.
    pub plugin: String,
    /// Capability family.
    pub capability: &'static str,
    /// What was attempted.
    pub detail: String,
    /// How to allow it.
    pub hint: String,
}

/// The effective capabilities of one plugin: request ∩ grant, resolved.
#[derive(Debug, Clone, Default)]
pub struct EffectiveCapabilities {
    plugin: String,
    requested: Capabilities,
    granted: Capabilities,
    dirs: Vec<ResolvedDir>,
}

impl EffectiveCapabilities {
    /// Computes the intersection. Filesystem grants are resolved against
    /// `workspace`; a grant naming the workspace when none is configured, or a
    /// path that does not exist, is skipped (and reported by `skipped`).
    pub fn new(
        plugin: &str,
        requested: &Capabilities,
        granted: &Capabilities,
        workspace: Option<&Path>,
    ) -> (Self, Vec<String>) {
        let mut skipped = Vec::new();
        let mut dirs: Vec<ResolvedDir> = Vec::new();
        let resolve = |raw: &str| -> Option<PathBuf> {
            match parse_fs_path(raw).ok()? {
                FsRoot::Workspace(rel) => Some(workspace?.join(rel)),
                FsRoot::Absolute(p) => Some(p),
            }
        };
        for req in &requested.filesystem {
            let Some(req_path) = resolve(&req.path) else {
                skipped.push(format!(
                    "filesystem {:?}: no workspace is configured",
                    req.path
                ));
                continue;
            };
            // The best grant covering the requested path decides the access mode.
            let covering = granted
                .filesystem
                .iter()
                .filter_map(|g| resolve(&g.path).map(|p| (p, g.access)))
                .filter(|(p, _)| req_path.starts_with(p))
                .map(|(_, a)| a)
                .max();
            let Some(grant_access) = covering else {
                continue;
            };
            match std::fs::canonicalize(&req_path) {
                Ok(path) => dirs.push(ResolvedDir {
                    path,
                    access: grant_access.min(req.access),
                }),
                Err(e) => skipped.push(format!("filesystem {}: {e}", req_path.display())),
            }
        }
        (
            Self {
                plugin: plugin.to_string(),
                requested: requested.clone(),
                granted: granted.clone(),
                dirs,
            },
            skipped,
        )
    }

    /// Directories to preopen.
    pub fn dirs(&self) -> &[ResolvedDir] {
        &self.dirs
    }

    /// The manifest's request.
    pub fn requested(&self) -> &Capabilities {
        &self.requested
    }

    /// The operator's grant.
    pub fn granted(&self) -> &Capabilities {
        &self.granted
    }

    fn denial(&self, capability: &'static str, detail: String, key: &str, value: &str) -> Denial {
        let in_request = match capability {
            "http" => list_matches_host(&self.requested.http, value),
            "exec" => self.requested.exec.iter().any(|e| e == value),
            "env" => self.requested.env.iter().any(|e| e == value),
            "secret" => self.requested.secrets.iter().any(|e| e == value),
            _ => false,
        };
        let hint = if in_request {
            format!(
                "grant it with [plugins.grants.{}] {key} = [\"{value}\"]",
                self.plugin
            )
        } else {
            format!(
                "the plugin's manifest does not request it: add {key} = [\"{value}\"] under [capabilities] in its plugin.toml, then grant it with [plugins.grants.{}] {key} = [\"{value}\"]",
                self.plugin
            )
        };
        Denial {
            plugin: self.plugin.clone(),
            capability,
            detail,
            hint,
        }
    }

    /// Checks an outbound HTTP request to `host:port`: an explicitly granted
    /// host is [`HttpAccess::Granted`]; any other host is allowed only as
    /// [`HttpAccess::PublicOnly`] when `<public>` is requested and granted.
    pub fn check_http(&self, host: &str, port: u16) -> Result<HttpAccess, Denial> {
        let allowed = |list: &[String]| {
            list.iter()
                .filter_map(|p| HostPattern::parse(p).ok())
                .any(|p| p.matches(host, port))
        };
        let has = |list: &[String], v: &str| list.iter().any(|h| h == v);
        let requested =
            allowed(&self.requested.http) || has(&self.requested.http, CONFIGURED_HOSTS);
        if requested && allowed(&self.granted.http) {
            return Ok(HttpAccess::Granted);
        }
        if has(&self.requested.http, PUBLIC_HOSTS) && has(&self.granted.http, PUBLIC_HOSTS) {
            return Ok(HttpAccess::PublicOnly);
        }
        let value = if matches!(port, 80 | 443) {
            host.to_string()
        } else {
            format!("{host}:{port}")
        };
        Err(self.denial("http", format!("request to {host}:{port}"), "http", &value))
    }

    /// Checks spawning `program`.
    pub fn check_exec(&self, program: &str) -> Result<(), Denial> {
        let name = Path::new(program)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(program);
        let ok = |list: &[String]| list.iter().any(|p| p == program || p == name);
        if ok(&self.requested.exec) && ok(&self.granted.exec) {
            Ok(())
        } else {
            Err(self.denial("exec", format!("spawn {program:?}"), "exec", name))
        }
    }

    /// Environment variable names both requested and granted: a child may
    /// inherit these from the host (credential-like names excepted) or get
    /// them set by the plugin.
    pub fn env_names(&self) -> impl Iterator<Item = &str> {
        self.requested
            .env
            .iter()
            .filter(|n| self.granted.env.contains(n))
            .map(String::as_str)
    }

    /// Checks passing the environment variable `name` to a child.
    pub fn check_env(&self, name: &str) -> Result<(), Denial> {
        let ok = |list: &[String]| list.iter().any(|p| p == name);
        if ok(&self.requested.env) && ok(&self.granted.env) {
            Ok(())
        } else {
            Err(self.denial("env", format!("environment variable {name}"), "env", name))
        }
    }

    /// Checks asking the session's model for a completion.
    pub fn check_model(&self) -> Result<(), Denial> {
        if self.requested.model && self.granted.model {
            Ok(())
        } else {
            Err(Denial {
                plugin: self.plugin.clone(),
                capability: "model",
                detail: "a completion from the session's model".into(),
                hint: format!("[plugins.grants.{}] model = true", self.plugin),
            })
        }
    }

    /// Checks referencing the secret `name`.
    pub fn check_secret(&self, name: &str) -> Result<(), Denial> {
        let ok = |list: &[String]| list.iter().any(|p| p == name);
        if ok(&self.requested.secrets) && ok(&self.granted.secrets) {
            Ok(())
        } else {
            Err(self.denial("secret", format!("secret {name}"), "secrets", name))
        }
    }

    /// Checks that `path` (absolute) lies inside a granted directory with at least `need`.
    pub fn check_path(&self, path: &Path, need: Access) -> Result<(), Denial> {
        let ok = self
            .dirs
            .iter()
            .any(|d| path.starts_with(&d.path) && d.access >= need);
        if ok {
            Ok(())
        } else {
            let detail = format!("{} access to {}", need.short(), path.display());
            let mut d = self.denial("filesystem", detail, "filesystem", "");
            d.hint = format!(
                "request and grant it: filesystem = [{{ path = \"{}\", access = \"{}\" }}] in plugin.toml [capabilities] and in [plugins.grants.{}]",
                path.display(),
                need.short(),
                self.plugin
            );
            Err(d)
        }
    }
}

fn list_matches_host(list: &[String], value: &str) -> bool {
    let (host, port) = match split_host_port(value) {
        Some((h, p)) => (h, p.unwrap_or(443)),
        None => return false,
    };
    list.iter()
        .filter_map(|p| HostPattern::parse(p).ok())
        .any(|p| p.matches(host, port) || p.matches(host, 80))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps_http(hosts: &[&str]) -> Capabilities {
        Capabilities {
            http: hosts.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn host_patterns_match_exactly_what_they_name() {
        let p = HostPattern::parse("api.example.com").unwrap();
        assert!(p.matches("API.example.com", 443));
        assert!(!p.matches("evil-api.example.com", 443));
        let w = HostPattern::parse("*.example.com").unwrap();
        assert!(w.matches("a.example.com", 80));
        assert!(!w.matches("example.com", 80));
        assert!(!w.matches("aexample.com", 80));
        let port = HostPattern::parse("127.0.0.1:8080").unwrap();
        assert!(port.matches("127.0.0.1", 8080));
        assert!(!port.matches("127.0.0.1", 8081));
        let v6 = HostPattern::parse("[::1]:9000").unwrap();
        assert!(v6.matches("[::1]", 9000));
    }

    #[test]
    fn footgun_forms_are_rejected() {
        assert!(HostPattern::parse("*").is_err());
        assert!(HostPattern::parse("").is_err());
        assert!(HostPattern::parse("a.com/path").is_err());
        assert!(HostPattern::parse("<configured>").is_err());
        assert!(HostPattern::parse("a b.com").is_err());
        let bad_path = Capabilities {
            filesystem: vec![FsGrant {
                path: "../etc".into(),
                access: Access::ReadOnly,
            }],
            ..Default::default()
        };
        assert!(bad_path.validate().is_err());
        let bad_exec = Capabilities {
            exec: vec!["*".into()],
            ..Default::default()
        };
        assert!(bad_exec.validate().is_err());
    }

    #[test]
    fn effective_http_is_the_intersection() {
        let (eff, _) = EffectiveCapabilities::new(
            "p",
            &caps_http(&["a.com", "b.com"]),
            &caps_http(&["b.com", "c.com"]),
            None,
        );
        assert!(eff.check_http("b.com", 443).is_ok());
        let denied_a = eff.check_http("a.com", 443).unwrap_err();
        assert!(
            denied_a
                .hint
                .contains("[plugins.grants.p] http = [\"a.com\"]")
        );
        let denied_c = eff.check_http("c.com", 443).unwrap_err();
        assert!(denied_c.hint.contains("manifest does not request it"));
    }

    #[test]
    fn filesystem_access_is_the_weaker_of_request_and_grant() {
        let ws = tempfile::tempdir().unwrap();
        let req = Capabilities {
            filesystem: vec![FsGrant {
                path: "workspace".into(),
                access: Access::ReadWrite,
            }],
            ..Default::default()
        };
        let grant = Capabilities {
            filesystem: vec![FsGrant {
                path: "workspace".into(),
                access: Access::ReadOnly,
            }],
            ..Default::default()
        };
        let (eff, skipped) = EffectiveCapabilities::new("p", &req, &grant, Some(ws.path()));
        assert!(skipped.is_empty());
        assert_eq!(eff.dirs().len(), 1);
        assert_eq!(eff.dirs()[0].access, Access::ReadOnly);
        let canon = std::fs::canonicalize(ws.path()).unwrap();
        assert!(eff.check_path(&canon.join("f"), Access::ReadOnly).is_ok());
        assert!(eff.check_path(&canon.join("f"), Access::ReadWrite).is_err());
        // No grant at all: nothing is preopened.
        let (none, _) =
            EffectiveCapabilities::new("p", &req, &Capabilities::default(), Some(ws.path()));
        assert!(none.dirs().is_empty());
    }

    #[test]
    fn configured_hosts_defer_to_the_concrete_grant() {
        let req = caps_http(&[CONFIGURED_HOSTS]);
        assert!(req.validate().is_err(), "not allowed in grants");
        assert!(req.validate_with(true).is_ok());
        let (eff, _) = EffectiveCapabilities::new("p", &req, &caps_http(&["127.0.0.1:8000"]), None);
        assert!(eff.check_http("127.0.0.1", 8000).is_ok());
        assert!(eff.check_http("127.0.0.1", 8001).is_err());
        let (none, _) = EffectiveCapabilities::new("p", &req, &Capabilities::default(), None);
        assert!(
            none.check_http("127.0.0.1", 8000).is_err(),
            "nothing without a grant"
        );
    }

    #[test]
    fn exec_matches_by_program_name() {
        let c = Capabilities {
            exec: vec!["bash".into()],
            ..Default::default()
        };
        let (eff, _) = EffectiveCapabilities::new("p", &c, &c, None);
        assert!(eff.check_exec("bash").is_ok());
        assert!(eff.check_exec("/bin/bash").is_ok());
        assert!(eff.check_exec("sh").is_err());
    }
}
