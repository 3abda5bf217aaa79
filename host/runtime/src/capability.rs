//! Two-sided capabilities: what a plugin's manifest requests, what the operator
//! grants, and the effective set (their intersection) enforced at the host boundary.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Component, Path, PathBuf};
use thiserror::Error;

/// How an allowed HTTP request must be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpAccess {
    /// An explicitly granted host: sent as is.
    Granted,
    /// Allowed only through the SSRF guard (`<public>`).
    PublicOnly,
}

/// Whether the processes a plugin spawns run in the kernel sandbox
/// (`turnstone-sandbox`: Landlock, seccomp, a private network namespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProcessSandbox {
    /// Sandboxed (the default).
    On,
    /// The operator opted this plugin out: its processes run with the host
    /// user's rights.
    Off,
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
    /// Host-held secrets the plugin may reference, each bound to the hosts
    /// and headers its value may be sent in ([`SecretGrant`]).
    #[serde(default)]
    pub secrets: Vec<SecretGrant>,
    /// May ask the calling session's model for a completion (`model` interface).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub model: bool,
    /// May read (`read-only`) or also save and delete (`read-write`) the
    /// memories its caller may see (`memory` interface, WIT 0.2.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Access>,
    /// May search its caller's own past conversations (`history`, 0.2.0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub history: bool,
    /// May read (`read-only`: list, search, get, activate) or also save
    /// (`read-write`) skills (`skills`, 0.2.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Access>,
    /// May learn its caller's workstream, user, model and workspace
    /// (`session-info`, 0.2.0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub session: bool,
    /// May run sub-agents for its caller (`agents`, 0.2.0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub agents: bool,
    /// May create, list and cancel its caller's watches (`watches`, 0.2.0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub watches: bool,
    /// May read its caller's notification targets and deliver to them
    /// (`notify-targets`, 0.2.0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub notify: bool,
    /// May open content in its caller's preview pane and read the
    /// workstream's attachments (`preview`, 0.2.0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub preview: bool,
    /// Operator only: `off` runs the processes this plugin spawns without
    /// the kernel sandbox (default `on`). A manifest's value is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_sandbox: Option<ProcessSandbox>,
}

/// A capability family: what a [`Denial`] or a [`CapabilityParseError::BadName`]
/// is about. Typed so that dispatch on it is exhaustive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CapabilityKind {
    /// Filesystem paths (`filesystem`).
    Filesystem,
    /// Outbound HTTP (`http`).
    Http,
    /// Spawning programs (`exec`).
    Exec,
    /// Environment variables passed to children (`env`).
    Env,
    /// Host-held secrets (`secrets`).
    Secret,
    /// Completions from the session's model (`model`).
    Model,
    /// The caller's memories (`memory`).
    Memory,
    /// The caller's past conversations (`history`).
    History,
    /// The skills catalogue (`skills`).
    Skills,
    /// Who and where the caller is (`session`).
    Session,
    /// Sub-agents (`agents`).
    Agents,
    /// Watches (`watches`).
    Watches,
    /// Notification targets (`notify`).
    Notify,
    /// The preview pane (`preview`).
    Preview,
}

impl CapabilityKind {
    /// The name shown in denials and errors, and sent to guests as the WIT
    /// `capability-error.capability`; guests and tests match on these exact
    /// strings, so they must not change.
    pub fn as_str(self) -> &'static str {
        match self {
            CapabilityKind::Filesystem => "filesystem",
            CapabilityKind::Http => "http",
            CapabilityKind::Exec => "exec",
            CapabilityKind::Env => "env",
            CapabilityKind::Secret => "secret",
            CapabilityKind::Model => "model",
            CapabilityKind::Memory => "memory",
            CapabilityKind::History => "history",
            CapabilityKind::Skills => "skills",
            CapabilityKind::Session => "session",
            CapabilityKind::Agents => "agents",
            CapabilityKind::Watches => "watches",
            CapabilityKind::Notify => "notify",
            CapabilityKind::Preview => "preview",
        }
    }

    /// The `[capabilities]` / `[plugins.grants.*]` key holding this family;
    /// differs from [`CapabilityKind::as_str`] only for secrets (the list is
    /// `secrets`, one entry is a "secret").
    fn toml_key(self) -> &'static str {
        match self {
            CapabilityKind::Secret => "secrets",
            other => other.as_str(),
        }
    }
}

impl fmt::Display for CapabilityKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
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
    /// A secret bound to `<public>`: a secret goes only to hosts named by name.
    #[error(
        "secret {0:?} cannot be sent to \"<public>\": name the hosts it may go to (hosts = [\"api.example.com\"])"
    )]
    PublicSecretHost(String),
    /// A program, variable or secret name that is empty or contains odd characters.
    #[error("{kind} name {name:?} is invalid")]
    BadName {
        /// Which list the name is in.
        kind: CapabilityKind,
        /// The offending name.
        name: String,
    },
}

impl Capabilities {
    /// This request as a grant: without the `<configured>` placeholders,
    /// which stand for whatever the operator names and are not grantable
    /// themselves (a built-in's default grant is its request).
    pub fn grantable(&self) -> Capabilities {
        let mut g = self.clone();
        g.http.retain(|h| h.trim() != HostRule::CONFIGURED_SPELLING);
        g.secrets
            .retain(|s| s.name != HostRule::CONFIGURED_SPELLING);
        g
    }

    /// Rejects footgun forms at parse time (an empty allowlist denies everything;
    /// a `*` never means "everything").
    pub fn validate(&self) -> Result<(), CapabilityParseError> {
        self.validate_with(false)
    }

    /// Like [`Capabilities::validate`]; `allow_configured` permits the
    /// [`HostRule::Configured`] request form (provider and channel manifests only).
    pub fn validate_with(&self, allow_configured: bool) -> Result<(), CapabilityParseError> {
        for h in &self.http {
            HostRule::parse(h, allow_configured)?;
        }
        for g in &self.filesystem {
            parse_fs_path(&g.path)?;
        }
        for s in &self.secrets {
            s.validate(allow_configured)?;
        }
        let secret_names: Vec<String> = self.secrets.iter().map(|s| s.name.clone()).collect();
        for (kind, list) in [
            (CapabilityKind::Exec, &self.exec),
            (CapabilityKind::Env, &self.env),
            (CapabilityKind::Secret, &secret_names),
        ] {
            for name in list {
                // A manifest may ask for whatever secrets the operator
                // grants by name (`<configured>`, like hosts); a grant names them.
                if kind == CapabilityKind::Secret
                    && allow_configured
                    && name == HostRule::CONFIGURED_SPELLING
                {
                    continue;
                }
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
            && self.memory.is_none()
            && !self.history
            && self.skills.is_none()
            && !self.session
            && !self.agents
            && !self.watches
            && !self.notify
            && !self.preview
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
        let host_chars_ok = if let Some(inner) = host.strip_prefix('[') {
            // `*.[` (a wildcard before a bracket) leaves a lone `[` here.
            inner.strip_suffix(']').is_some_and(|v6| {
                !v6.is_empty()
                    && v6
                        .chars()
                        .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
            })
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

/// Writes the normalized manifest form (`host`, `host:port`, `*.domain`,
/// `[v6]:port`), which [`HostPattern::parse`] reads back to an equal pattern.
impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.wildcard {
            f.write_str("*.")?;
        }
        f.write_str(&self.host)?;
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

/// One parsed `http` entry of a manifest request or an operator grant. The
/// wire and TOML form stays a string ([`Capabilities::http`]); this is what
/// it means, parsed once so enforcement never compares raw strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostRule {
    /// A concrete host, `host:port` or `*.domain`.
    Pattern(HostPattern),
    /// "Any host whose addresses are all public": every request (so every
    /// redirect hop) is resolved and screened by the host's SSRF guard
    /// ([`crate::netguard`]). Valid in manifests and grants.
    Public,
    /// Manifest-only entry of provider and channel plugins: "whatever host the
    /// operator configures for me". It never matches by itself; the operator's
    /// concrete grant (e.g. a model alias's base URL host) decides.
    Configured,
}

impl HostRule {
    /// Manifest/TOML spelling of [`HostRule::Public`].
    pub const PUBLIC_SPELLING: &'static str = "<public>";

    /// Manifest/TOML spelling of [`HostRule::Configured`].
    pub const CONFIGURED_SPELLING: &'static str = "<configured>";

    /// Parses one `http` entry. The keywords must be spelled exactly (no
    /// trimming or case folding) so that a near miss is rejected as a bad host
    /// rather than silently widening access. `allow_configured` admits
    /// [`HostRule::Configured`], which only provider and channel manifests may
    /// request; everywhere else it is a [`CapabilityParseError::BadHost`].
    pub fn parse(raw: &str, allow_configured: bool) -> Result<Self, CapabilityParseError> {
        if raw == Self::PUBLIC_SPELLING {
            Ok(HostRule::Public)
        } else if raw == Self::CONFIGURED_SPELLING {
            if allow_configured {
                Ok(HostRule::Configured)
            } else {
                Err(CapabilityParseError::BadHost(raw.to_string()))
            }
        } else {
            HostPattern::parse(raw).map(HostRule::Pattern)
        }
    }

    /// Whether a request to `host:port` matches by name. Only a
    /// [`HostRule::Pattern`] can: `Public` is decided by the SSRF guard and
    /// `Configured` by the operator's concrete grant, never by the name.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        match self {
            HostRule::Pattern(p) => p.matches(host, port),
            HostRule::Public | HostRule::Configured => false,
        }
    }
}

/// Writes the manifest spelling back (normalized for patterns), so that
/// [`HostRule::parse`] of the output yields an equal rule.
impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostRule::Pattern(p) => write!(f, "{p}"),
            HostRule::Public => f.write_str(Self::PUBLIC_SPELLING),
            HostRule::Configured => f.write_str(Self::CONFIGURED_SPELLING),
        }
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
    /// Capability family; its [`Display`](fmt::Display) is the name guests see.
    pub capability: CapabilityKind,
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
    /// `requested.http`, parsed once at construction.
    requested_http: Vec<HostRule>,
    /// `granted.http`, parsed once at construction.
    granted_http: Vec<HostRule>,
    /// Where each effective secret may go.
    secrets: Vec<SecretBinding>,
    dirs: Vec<ResolvedDir>,
}

impl EffectiveCapabilities {
    /// The plugin these capabilities belong to.
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// Whether spawned processes run in the kernel sandbox: yes unless the
    /// operator's grant says `process_sandbox = "off"`.
    pub fn process_sandbox(&self) -> bool {
        self.granted.process_sandbox != Some(ProcessSandbox::Off)
    }

    /// Whether any HTTP host is effective (a spawned process then gets the
    /// egress proxy; otherwise no network at all).
    pub fn has_http(&self) -> bool {
        !self.granted_http.is_empty() && !self.requested_http.is_empty()
    }

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
                // The manifest side may carry `<configured>` (validation only
                // admits it for provider and channel manifests); a grant never
                // can, and check_http would not consult it there anyway.
                requested_http: parse_host_rules(&requested.http, true),
                granted_http: parse_host_rules(&granted.http, false),
                secrets: granted
                    .secrets
                    .iter()
                    .filter_map(|g| SecretBinding::new(&requested.secrets, g))
                    .collect(),
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

    /// Builds the denial for `capability`, with a hint that says whether the
    /// manifest already requests `value` (then only the grant is missing).
    fn denial(&self, capability: CapabilityKind, detail: String, value: &str) -> Denial {
        let key = capability.toml_key();
        let in_request = match capability {
            CapabilityKind::Http => self.requests_host(value),
            CapabilityKind::Exec => self.requested.exec.iter().any(|e| e == value),
            CapabilityKind::Env => self.requested.env.iter().any(|e| e == value),
            CapabilityKind::Secret => self
                .requested
                .secrets
                .iter()
                .any(|e| e.name == value || e.name == HostRule::CONFIGURED_SPELLING),
            // Their callers write their own hint (or none applies).
            CapabilityKind::Filesystem
            | CapabilityKind::Model
            | CapabilityKind::Memory
            | CapabilityKind::History
            | CapabilityKind::Skills
            | CapabilityKind::Session
            | CapabilityKind::Agents
            | CapabilityKind::Watches
            | CapabilityKind::Notify
            | CapabilityKind::Preview => false,
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
        let named = |rules: &[HostRule]| rules.iter().any(|r| r.matches(host, port));
        // `<configured>` stands for whatever concrete host the operator grants.
        let requested =
            named(&self.requested_http) || self.requested_http.contains(&HostRule::Configured);
        if requested && named(&self.granted_http) {
            return Ok(HttpAccess::Granted);
        }
        if self.requested_http.contains(&HostRule::Public)
            && self.granted_http.contains(&HostRule::Public)
        {
            return Ok(HttpAccess::PublicOnly);
        }
        let value = if matches!(port, 80 | 443) {
            host.to_string()
        } else {
            format!("{host}:{port}")
        };
        Err(self.denial(
            CapabilityKind::Http,
            format!("request to {host}:{port}"),
            &value,
        ))
    }

    /// Whether the manifest names the host in `value` (`host` or
    /// `host:port`, as the denial hint prints it); a bare host counts at
    /// either default port.
    fn requests_host(&self, value: &str) -> bool {
        let Some((host, port)) = split_host_port(value) else {
            return false;
        };
        let port = port.unwrap_or(443);
        self.requested_http
            .iter()
            .any(|r| r.matches(host, port) || r.matches(host, 80))
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
            Err(self.denial(CapabilityKind::Exec, format!("spawn {program:?}"), name))
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
            Err(self.denial(
                CapabilityKind::Env,
                format!("environment variable {name}"),
                name,
            ))
        }
    }

    /// Checks asking the session's model for a completion.
    pub fn check_model(&self) -> Result<(), Denial> {
        if self.requested.model && self.granted.model {
            Ok(())
        } else {
            Err(Denial {
                plugin: self.plugin.clone(),
                capability: CapabilityKind::Model,
                detail: "a completion from the session's model".into(),
                hint: format!("[plugins.grants.{}] model = true", self.plugin),
            })
        }
    }

    /// Checks referencing the secret `name` (obtaining its reference token).
    pub fn check_secret(&self, name: &str) -> Result<(), Denial> {
        if self.secrets.iter().any(|b| b.name == name) {
            Ok(())
        } else {
            Err(self.denial(CapabilityKind::Secret, format!("secret {name}"), name))
        }
    }

    /// Checks sending the secret `name` in the header `header` of a request
    /// to `host:port`: the secret must be granted, the header one its binding
    /// allows, and the host one both sides bind it to (a side without
    /// `hosts` binds it to its named `http` hosts; `<public>` never counts).
    pub fn check_secret_use(
        &self,
        name: &str,
        header: &str,
        host: &str,
        port: u16,
    ) -> Result<(), Denial> {
        self.check_secret(name)?;
        let Some(b) = self.secrets.iter().find(|b| b.name == name) else {
            return Err(self.denial(CapabilityKind::Secret, format!("secret {name}"), name));
        };
        let header = header.to_ascii_lowercase();
        let named = |rules: &[HostRule]| rules.iter().any(|r| r.matches(host, port));
        let requested_ok = if b.requested_hosts.is_empty() {
            named(&self.requested_http) || self.requested_http.contains(&HostRule::Configured)
        } else {
            named(&b.requested_hosts) || b.requested_hosts.contains(&HostRule::Configured)
        };
        let granted_ok = if b.granted_hosts.is_empty() {
            named(&self.granted_http)
        } else {
            named(&b.granted_hosts)
        };
        if b.headers.contains(&header) && requested_ok && granted_ok {
            return Ok(());
        }
        let target = if matches!(port, 80 | 443) {
            host.to_string()
        } else {
            format!("{host}:{port}")
        };
        let allowed_hosts: Vec<String> = if b.granted_hosts.is_empty() {
            self.granted_http
                .iter()
                .filter(|r| matches!(r, HostRule::Pattern(_)))
                .map(ToString::to_string)
                .collect()
        } else {
            b.granted_hosts.iter().map(ToString::to_string).collect()
        };
        Err(Denial {
            plugin: self.plugin.clone(),
            capability: CapabilityKind::Secret,
            detail: format!("secret {name} in header {header} of a request to {host}:{port}"),
            hint: format!(
                "secret {name} may be sent only in {} to {}; to send it here, request and grant secrets = [{{ name = \"{name}\", hosts = [\"{target}\"], header = \"{header}\" }}] (plugin.toml [capabilities] and [plugins.grants.{}])",
                if b.headers.is_empty() {
                    "no header (the manifest and the grant name different headers)".to_string()
                } else {
                    b.headers.join(", ")
                },
                if allowed_hosts.is_empty() {
                    "no host".to_string()
                } else {
                    allowed_hosts.join(", ")
                },
                self.plugin
            ),
        })
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
            let mut d = self.denial(CapabilityKind::Filesystem, detail, "");
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

/// Parses an `http` list for enforcement. Load-time validation
/// ([`Capabilities::validate_with`]) already rejected malformed entries with
/// an error the operator sees; one that still fails here (a set built without
/// validation) would match nothing anyway, so it is skipped rather than
/// failing plugin instantiation.
fn parse_host_rules(raw: &[String], allow_configured: bool) -> Vec<HostRule> {
    raw.iter()
        .filter_map(|h| HostRule::parse(h, allow_configured).ok())
        .collect()
}

mod agent;
mod secret;
mod summary;
#[cfg(test)]
mod tests;

use secret::SecretBinding;
pub use secret::{DEFAULT_SECRET_HEADER, SecretGrant};
