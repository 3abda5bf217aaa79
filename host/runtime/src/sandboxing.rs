//! Processes a plugin spawns run under its grants, enforced by the kernel
//! (`turnstone-sandbox`): its filesystem grants become the Landlock ruleset,
//! its `http` grant the egress proxy's rules (no grant: no network), plus
//! the seccomp deny list. The operator can opt a plugin out
//! (`process_sandbox = "off"` in its grant).

use crate::audit::AuditRecorder;
use crate::capability::{Access, EffectiveCapabilities, HttpAccess};
use crate::netguard::NetworkPolicy;
use crate::plugin::{PluginContext, PluginCounters};
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
pub use turnstone_sandbox::{
    DEFAULT_HOME_CONFIG, Policy, Prepared, Running, Sandbox, Support, SystemPaths,
};

static HOST: OnceLock<Arc<Sandbox>> = OnceLock::new();

/// Sets this process's sandbox from the operator's configuration (once, at
/// start, before plugins load). Returns false when one was already set.
pub fn set_host_sandbox(sandbox: Arc<Sandbox>) -> bool {
    HOST.set(sandbox).is_ok()
}

/// This process's sandbox: the configured one, else [`default_sandbox`].
pub fn host_sandbox() -> Arc<Sandbox> {
    HOST.get().cloned().unwrap_or_else(default_sandbox)
}

/// The host-wide sandbox for hosts that configure nothing: this kernel,
/// the default system locations and the toolchains on `PATH`. Probed once.
pub fn default_sandbox() -> Arc<Sandbox> {
    static DEFAULT: OnceLock<Arc<Sandbox>> = OnceLock::new();
    DEFAULT
        .get_or_init(|| {
            Arc::new(Sandbox::new(
                Support::probe(),
                SystemPaths::default()
                    .with_toolchains(
                        std::env::var_os("PATH").as_deref(),
                        std::env::var_os("RUSTUP_HOME").map(Into::into),
                    )
                    .with_home_config(
                        std::env::var_os("HOME").map(PathBuf::from).as_deref(),
                        turnstone_sandbox::DEFAULT_HOME_CONFIG,
                    ),
            ))
        })
        .clone()
}

/// How one spawned process is confined, for the capability audit and logs.
pub(crate) fn describe(network: bool) -> String {
    if network {
        "sandboxed: Landlock, seccomp, network only through the egress proxy".into()
    } else {
        "sandboxed: Landlock, seccomp, no network".into()
    }
}

/// Shown in the audit when the operator opted the plugin out.
pub(crate) const OPTED_OUT: &str = "not sandboxed: the operator set process_sandbox = \"off\"";

/// The sandbox for one process of `plugin`, or `None`
/// when the operator opted the plugin out. An unavailable sandbox is an
/// error naming the opt-out, never a silent downgrade.
pub(crate) fn prepare(
    plugin: &PluginContext,
    audit: &AuditRecorder,
) -> Result<Option<Prepared>, String> {
    if !plugin.caps.process_sandbox() {
        return Ok(None);
    }
    let policy = policy(&plugin.caps, || {
        Arc::new(PluginEgress {
            caps: plugin.caps.clone(),
            network: plugin.network.clone(),
            counters: plugin.counters.clone(),
            audit: audit.clone(),
        })
    });
    plugin.sandbox.prepare(&policy).map(Some).map_err(|e| {
        format!(
            "{e}; to run {}'s processes unsandboxed, set process_sandbox = \"off\" in [plugins.grants.{}]",
            plugin.name, plugin.name
        )
    })
}

/// The policy for `caps`: read-write and read-only grants as given,
/// network through `egress` only with an `http` grant, a private temp
/// directory. (Programs resolve through the system locations and the
/// toolchains on `PATH`; `exec` grants match file names, so a program's
/// own directory is never granted for it.)
pub fn policy(
    caps: &EffectiveCapabilities,
    egress: impl FnOnce() -> Arc<dyn turnstone_sandbox::EgressPolicy>,
) -> Policy {
    let mut policy = Policy::default();
    for d in caps.dirs() {
        match d.access {
            Access::ReadWrite => policy.read_write.push(d.path.clone()),
            Access::ReadOnly => policy.read_only.push(d.path.clone()),
        }
    }
    if caps.has_http() {
        policy.network = Some(egress());
    }
    policy.tmp_dir = private_tmp_dir(caps.plugin());
    policy
}

/// `$TMPDIR/turnstone-tmp-<uid>/<plugin>` (mode 0700), created on first
/// use: the plugin's processes share it (it is their `TMPDIR`), no other
/// plugin's do. `None` when it cannot be made safely.
pub fn private_tmp_dir(plugin: &str) -> Option<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let uid = rustix::process::geteuid().as_raw();
    let root = std::env::temp_dir().join(format!("turnstone-tmp-{uid}"));
    let dir = root.join(plugin.replace(['/', '.'], "_"));
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true).mode(0o700);
    b.create(&dir).ok()?;
    // Refuse a directory someone else planted or opened up.
    let meta = std::fs::symlink_metadata(&root).ok()?;
    use std::os::unix::fs::MetadataExt;
    if meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 || !meta.is_dir() {
        tracing::warn!(
            "not using {} as private temp: not ours or not 0700",
            root.display()
        );
        return None;
    }
    std::fs::canonicalize(dir).ok()
}

/// The egress proxy's rules for one plugin: its `http` grant, `<public>`
/// screened by the SSRF guard; each decision goes into the capability audit.
pub struct PluginEgress {
    caps: EffectiveCapabilities,
    network: NetworkPolicy,
    counters: Arc<PluginCounters>,
    audit: AuditRecorder,
}

impl PluginEgress {
    /// Rules from `caps`, `<public>` screened by `network`.
    pub fn new(
        caps: EffectiveCapabilities,
        network: NetworkPolicy,
        counters: Arc<PluginCounters>,
        audit: AuditRecorder,
    ) -> Self {
        Self {
            caps,
            network,
            counters,
            audit,
        }
    }
}

impl turnstone_sandbox::EgressPolicy for PluginEgress {
    fn resolve<'a>(
        &'a self,
        host: &'a str,
        port: u16,
        method: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<SocketAddr, String>> + Send + 'a>> {
        Box::pin(async move {
            let decided = match self.caps.check_http(host, port) {
                Err(d) => Err(d.to_string()),
                Ok(HttpAccess::PublicOnly) => self
                    .network
                    .screen(host, port)
                    .await
                    .map_err(|e| e.to_string()),
                Ok(HttpAccess::Granted) => match tokio::net::lookup_host((host, port)).await {
                    Ok(mut addrs) => addrs.next().ok_or_else(|| format!("{host} has no address")),
                    Err(e) => Err(format!("cannot resolve {host}: {e}")),
                },
            };
            self.audit.host(
                format!("{host}:{port}"),
                format!("{method} (process, via proxy)"),
                decided.as_ref().err().cloned(),
            );
            if let Err(reason) = &decided {
                self.counters.denial();
                tracing::warn!("egress proxy refused {host}:{port}: {reason}");
            }
            decided
        })
    }
}

/// Recognises a sandbox refusal in a process's stderr and says, once per
/// kind, which grant would allow it: the program only sees `EACCES`/`EPERM`
/// or a failed connection.
pub(crate) struct DenialHints {
    files: Option<String>,
    network: Option<String>,
    /// The end of the stderr seen so far: programs may write a message in
    /// many small writes (curl writes character by character).
    tail: String,
}

/// Bytes of earlier output kept to match a message split across reads.
const TAIL: usize = 64;

/// What programs print when Landlock or seccomp refused them.
const FILE_REFUSALS: &[&str] = &["Permission denied", "Operation not permitted"];
/// What programs print when there is no network in the namespace.
const NETWORK_REFUSALS: &[&str] = &[
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Name or service not known",
];

impl DenialHints {
    /// Hints for `plugin`'s grants.
    pub(crate) fn new(plugin: &PluginContext) -> Self {
        let name = &plugin.name;
        let list = |access: Access| {
            let dirs: Vec<String> = plugin
                .caps
                .dirs()
                .iter()
                .filter(|d| d.access == access)
                .map(|d| d.path.display().to_string())
                .collect();
            if dirs.is_empty() {
                "nothing".to_string()
            } else {
                dirs.join(", ")
            }
        };
        let files = format!(
            "[process sandbox] {name}'s processes may write only in: {}; read also: {} and the \
             system locations. A grant would allow more: [plugins.grants.{name}] filesystem = \
             [{{ path = \"/the/dir\", access = \"read-write\" }}] (or process_sandbox = \"off\").\n",
            list(Access::ReadWrite),
            list(Access::ReadOnly),
        );
        let network = (!plugin.caps.has_http()).then(|| {
            format!(
                "[process sandbox] {name}'s processes have no network: the plugin has no http \
                 grant. A grant would allow it: [plugins.grants.{name}] http = [\"host\"] (through \
                 the host's egress proxy).\n"
            )
        });
        Self {
            files: Some(files),
            network,
            tail: String::new(),
        }
    }

    /// The hint to add after `chunk`, if it shows a refusal not yet explained.
    pub(crate) fn after(&mut self, chunk: &[u8]) -> Option<String> {
        if self.files.is_none() && self.network.is_none() {
            return None;
        }
        self.tail.push_str(&String::from_utf8_lossy(chunk));
        let text = std::mem::take(&mut self.tail);
        // Keep the last TAIL bytes (on a character boundary) for next time.
        let mut cut = text.len().saturating_sub(TAIL);
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        self.tail = text[cut..].to_string();
        let mut out = String::new();
        if FILE_REFUSALS.iter().any(|m| text.contains(m))
            && let Some(h) = self.files.take()
        {
            out.push_str(&h);
        }
        if NETWORK_REFUSALS.iter().any(|m| text.contains(m))
            && let Some(h) = self.network.take()
        {
            out.push_str(&h);
        }
        (!out.is_empty()).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::DenialHints;

    fn hints() -> DenialHints {
        DenialHints {
            files: Some("FILES\n".into()),
            network: Some("NET\n".into()),
            tail: String::new(),
        }
    }

    #[test]
    fn a_refusal_split_across_reads_is_recognised_once() {
        let mut h = hints();
        let msg = "curl: (6) Could not resolve host: example.invalid\n";
        let mut got = Vec::new();
        for c in msg.as_bytes() {
            if let Some(x) = h.after(std::slice::from_ref(c)) {
                got.push(x);
            }
        }
        assert_eq!(got, ["NET\n"]);
        assert_eq!(h.after(msg.as_bytes()), None, "once per kind");
        assert_eq!(
            h.after(b"cat: x: Permission denied\n").as_deref(),
            Some("FILES\n")
        );
        assert_eq!(h.after(b"Permission denied\n"), None);
    }

    #[test]
    fn ordinary_output_gets_no_hint() {
        let mut h = hints();
        assert_eq!(h.after(b"warning: unused variable\n"), None);
        assert_eq!(h.after("é".repeat(100).as_bytes()), None);
    }
}
