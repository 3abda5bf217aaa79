//! What an MCP server may touch, in the same capability terms as a component.
//!
//! A server's configuration is its request (the program it runs, the host it
//! is reached at, the secret it is sent, its working directory); the grant
//! comes from `[plugins.grants.<server>]`. Servers written by the operator in
//! `config.toml` or `--mcp-config` default to a grant of exactly their own
//! request (the operator wrote both); servers with another origin (the admin
//! API) start with nothing.

use crate::config::{HttpSpec, StdioSpec, Transport};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use turnstone_runtime::capability::{DEFAULT_SECRET_HEADER, Denial, FsGrant, SecretGrant};
use turnstone_runtime::host::process::is_secret_name;
use turnstone_runtime::{Access, Capabilities, EffectiveCapabilities, SecretSource};

/// Where a server's definition came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `config.toml` or `--mcp-config`: the operator wrote it.
    Config,
    /// Created at run time (admin API): nothing is granted by default.
    Api,
}

impl Origin {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Config => "config",
            Origin::Api => "api",
        }
    }
}

/// Variables every child gets so programs resolve and print sanely (as for
/// processes spawned by components).
const BASE_ENV: &[&str] = &["PATH", "LANG", "TERM", "HOME"];

/// The capabilities a server's configuration asks for.
pub fn requested(transport: &Transport, workspace: &Path) -> Capabilities {
    match transport {
        Transport::Stdio(StdioSpec {
            command, cwd, args, ..
        }) => Capabilities {
            exec: vec![program_name(command).to_string()],
            filesystem: std::iter::once(cwd.clone().unwrap_or_else(|| workspace.to_path_buf()))
                .chain(program_reads(command, args))
                .map(|p| FsGrant {
                    path: p.display().to_string(),
                    access: Access::ReadOnly,
                })
                .collect(),
            // Any host variable or secret may be granted on top.
            env: Vec::new(),
            secrets: Vec::new(),
            ..Capabilities::default()
        },
        Transport::Http(HttpSpec {
            url, bearer_secret, ..
        }) => Capabilities {
            // A grant may name the host, or `<public>` (then every connection
            // is resolved and screened by the SSRF guard).
            http: vec![authority(url), "<public>".into()],
            // The bearer secret goes only to the server's own host.
            secrets: bearer_secret
                .iter()
                .map(|name| SecretGrant {
                    name: name.clone(),
                    hosts: vec![authority(url)],
                    headers: vec![DEFAULT_SECRET_HEADER.into()],
                })
                .collect(),
            ..Capabilities::default()
        },
    }
}

/// The grant in force: explicit, else the default for the origin.
pub fn effective_grant(
    explicit: Option<&Capabilities>,
    origin: Origin,
    requested: &Capabilities,
) -> Capabilities {
    match (explicit, origin) {
        (Some(g), _) => g.clone(),
        (None, Origin::Config) => requested.clone(),
        (None, Origin::Api) => Capabilities::default(),
    }
}

/// The effective set for server `name`. Granted env names, secrets, hosts
/// and extra directories (a stdio server's files: what the kernel sandbox lets
/// it read or write) are whatever the grant lists: the request cannot know
/// them in advance.
pub fn effective(
    name: &str,
    requested: &Capabilities,
    granted: &Capabilities,
) -> EffectiveCapabilities {
    let mut req = requested.clone();
    req.env = granted.env.clone();
    req.secrets.extend(granted.secrets.iter().cloned());
    // A stdio server's processes reach the hosts the operator grants,
    // through the sandbox's egress proxy.
    for h in &granted.http {
        if !req.http.contains(h) {
            req.http.push(h.clone());
        }
    }
    for g in &granted.filesystem {
        req.filesystem.retain(|r| r.path != g.path);
        req.filesystem.push(g.clone());
    }
    // Absolute paths only: no workspace indirection for MCP servers.
    EffectiveCapabilities::new(name, &req, granted, None).0
}

/// `host[:port]` as grants write it (the port only when not the scheme's default).
pub fn authority(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    }
}

/// What the server's own program needs to read, as its configuration names
/// it: a program given by path (its directory; a virtualenv's `bin/` means
/// the whole environment), and every argument that is an existing absolute
/// path (a script's directory; inside `node_modules`, the package tree that
/// holds it). The kernel sandbox lets the process read these and no more.
fn program_reads(command: &str, args: &[String]) -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut out: Vec<PathBuf> = Vec::new();
    let mut add = |p: PathBuf| {
        // Never `/`, `$HOME` or above it (`node ~/server.js` must not open
        // the whole home directory): name such a path in a grant instead.
        let too_wide = p.parent().is_none() || home.as_ref().is_some_and(|h| h.starts_with(&p));
        if !too_wide && !out.iter().any(|o| p.starts_with(o)) {
            out.retain(|o| !o.starts_with(&p));
            out.push(p);
        }
    };
    let program = Path::new(command);
    // The directory canonical, the program not: a virtualenv's `python` is
    // a symlink out of the environment.
    if program.is_absolute()
        && let Some(dir) = program.parent().and_then(|d| std::fs::canonicalize(d).ok())
    {
        let dir = dir.as_path();
        match dir.parent() {
            Some(env) if dir.ends_with("bin") && env.join("pyvenv.cfg").exists() => {
                add(env.to_path_buf())
            }
            _ => add(dir.to_path_buf()),
        }
    }
    for a in args {
        // Canonical: grants name real paths (no `..`, no symlinks).
        let Some(p) = Some(Path::new(a))
            .filter(|p| p.is_absolute())
            .and_then(|p| std::fs::canonicalize(p).ok())
        else {
            continue;
        };
        let p = p.as_path();
        let modules = p
            .ancestors()
            .find(|d| d.file_name().is_some_and(|n| n == "node_modules"))
            .and_then(Path::parent);
        match modules {
            Some(root) => add(root.to_path_buf()),
            None if p.is_dir() => add(p.to_path_buf()),
            None => {
                if let Some(d) = p.parent() {
                    add(d.to_path_buf());
                }
            }
        }
    }
    out
}

fn program_name(command: &str) -> &str {
    Path::new(command)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(command)
}

/// A checked plan for spawning a stdio server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnPlan {
    /// Program.
    pub program: String,
    /// Arguments.
    pub args: Vec<String>,
    /// The whole environment of the child.
    pub env: BTreeMap<String, OsString>,
    /// Working directory (inside a granted directory).
    pub cwd: PathBuf,
}

/// Checks a stdio server against its effective capabilities and builds its
/// scrubbed environment: the base variables, granted host variables that do
/// not look like credentials, granted secrets under their own names, and the
/// values the operator wrote in the server entry.
pub fn spawn_plan(
    spec: &StdioSpec,
    caps: &EffectiveCapabilities,
    workspace: &Path,
    secrets: &dyn SecretSource,
    host_env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<SpawnPlan, Denial> {
    let StdioSpec {
        command,
        args,
        env,
        cwd,
    } = spec;
    caps.check_exec(command)?;
    let cwd = cwd.clone().unwrap_or_else(|| workspace.to_path_buf());
    let real = std::fs::canonicalize(&cwd).unwrap_or(cwd.clone());
    caps.check_path(&real, Access::ReadOnly)?;
    let mut out = BTreeMap::new();
    for name in BASE_ENV {
        if let Some(v) = host_env(name) {
            out.insert((*name).to_string(), v);
        }
    }
    for name in &caps.granted().env {
        if !is_secret_name(name)
            && let Some(v) = host_env(name)
        {
            out.insert(name.clone(), v);
        }
    }
    // A stdio server gets its secrets as environment variables (no header
    // or host binding applies to a process's environment).
    for grant in &caps.granted().secrets {
        let name = &grant.name;
        caps.check_secret(name)?;
        if let Some(v) = secrets.secret(name) {
            out.insert(name.clone(), v.into());
        }
    }
    for (k, v) in env {
        out.insert(k.clone(), v.into());
    }
    Ok(SpawnPlan {
        program: command.clone(),
        args: args.clone(),
        env: out,
        cwd: real,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Secrets;
    impl SecretSource for Secrets {
        fn secret(&self, name: &str) -> Option<String> {
            (name == "GH_TOKEN").then(|| "s3cret".into())
        }
    }

    fn stdio(dir: &Path) -> StdioSpec {
        StdioSpec {
            command: "/usr/bin/python3".into(),
            args: vec!["srv.py".into()],
            env: [("MODE".to_string(), "test".to_string())].into(),
            cwd: Some(dir.to_path_buf()),
        }
    }

    fn host_env(name: &str) -> Option<OsString> {
        match name {
            "PATH" => Some("/usr/bin".into()),
            "MY_TOKEN" => Some("leak".into()),
            "VISIBLE" => Some("yes".into()),
            "OTHER" => Some("no".into()),
            _ => None,
        }
    }

    #[test]
    fn a_config_server_gets_its_own_command_and_nothing_more() {
        let dir = tempfile::tempdir().unwrap();
        let t = stdio(dir.path());
        let req = requested(&Transport::Stdio(t.clone()), dir.path());
        let grant = effective_grant(None, Origin::Config, &req);
        let caps = effective("py", &req, &grant);
        let plan = spawn_plan(&t, &caps, dir.path(), &Secrets, &host_env).unwrap();
        let names: Vec<&str> = plan.env.keys().map(String::as_str).collect();
        assert_eq!(names, ["MODE", "PATH"]);
        assert_eq!(plan.program, "/usr/bin/python3");
    }

    #[test]
    fn granted_names_pass_credentials_never_do_and_secrets_come_from_the_host() {
        let dir = tempfile::tempdir().unwrap();
        let t = stdio(dir.path());
        let req = requested(&Transport::Stdio(t.clone()), dir.path());
        let grant = Capabilities {
            env: vec!["VISIBLE".into(), "MY_TOKEN".into()],
            secrets: vec!["GH_TOKEN".into()],
            ..req.clone()
        };
        let caps = effective("py", &req, &grant);
        let plan = spawn_plan(&t, &caps, dir.path(), &Secrets, &host_env).unwrap();
        assert_eq!(plan.env.get("VISIBLE"), Some(&OsString::from("yes")));
        assert_eq!(plan.env.get("GH_TOKEN"), Some(&OsString::from("s3cret")));
        assert!(
            !plan.env.contains_key("MY_TOKEN"),
            "credential-like names never pass"
        );
        assert!(!plan.env.contains_key("OTHER"));
    }

    #[test]
    fn an_api_server_starts_with_nothing_and_the_denial_names_the_grant() {
        let dir = tempfile::tempdir().unwrap();
        let t = stdio(dir.path());
        let req = requested(&Transport::Stdio(t.clone()), dir.path());
        let grant = effective_grant(None, Origin::Api, &req);
        let caps = effective("py", &req, &grant);
        let d = spawn_plan(&t, &caps, dir.path(), &Secrets, &host_env).unwrap_err();
        assert!(
            d.hint.contains("[plugins.grants.py] exec = [\"python3\"]"),
            "{}",
            d.hint
        );
    }

    #[test]
    fn an_http_server_requests_its_authority_and_bearer_secret() {
        let t = Transport::Http(HttpSpec {
            url: url::Url::parse("http://127.0.0.1:8123/mcp").unwrap(),
            headers: BTreeMap::new(),
            bearer_secret: Some("TOK".into()),
        });
        let req = requested(&t, Path::new("/"));
        assert_eq!(req.http, ["127.0.0.1:8123", "<public>"]);
        assert_eq!(req.secrets.len(), 1);
        assert_eq!(req.secrets[0].name, "TOK");
        assert_eq!(
            req.secrets[0].hosts,
            ["127.0.0.1:8123"],
            "bound to the server"
        );
        assert_eq!(req.secrets[0].headers, ["authorization"]);
        let caps = effective("r", &req, &Capabilities::default());
        assert!(caps.check_http("127.0.0.1", 8123).is_err());
        let grant = effective_grant(None, Origin::Config, &req);
        let caps = effective("r", &req, &grant);
        assert_eq!(
            caps.check_http("127.0.0.1", 8123).unwrap(),
            turnstone_runtime::capability::HttpAccess::Granted
        );
        assert!(
            caps.check_secret_use("TOK", "authorization", "127.0.0.1", 8123)
                .is_ok()
        );
        assert!(
            caps.check_secret_use("TOK", "authorization", "127.0.0.1", 8124)
                .is_err()
        );
        assert!(
            caps.check_secret_use("TOK", "x-leak", "127.0.0.1", 8123)
                .is_err()
        );
        let public = Capabilities {
            http: vec!["<public>".into()],
            ..Default::default()
        };
        let caps = effective("r", &req, &public);
        assert_eq!(
            caps.check_http("127.0.0.1", 8123).unwrap(),
            turnstone_runtime::capability::HttpAccess::PublicOnly,
            "screened per connection"
        );
    }
}
