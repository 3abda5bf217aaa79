//! The rule table: what the heuristic judge looks for in a call, each rule
//! with its risk, advice and confidence. Every rule that matches is named in
//! the verdict; the riskiest one decides it.

use crate::shell::{Command, commands};
use regex_lite::Regex;
use serde_json::Value;
use std::sync::LazyLock;
use turnstone_plugin_sdk::guard::{Recommendation, Risk};

/// A rule that matched.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The rule's id, e.g. `download-piped-to-shell`.
    pub rule: &'static str,
    pub risk: Risk,
    pub recommendation: Recommendation,
    pub confidence: f32,
    /// What it saw.
    pub reason: String,
}

fn hit(
    rule: &'static str,
    risk: Risk,
    recommendation: Recommendation,
    confidence: f32,
    reason: impl Into<String>,
) -> Hit {
    Hit {
        rule,
        risk,
        recommendation,
        confidence,
        reason: reason.into(),
    }
}

/// What the judge knows about the session.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// The workspace directory.
    pub workspace: Option<String>,
    /// Hosts the plugin is granted (`http` grants).
    pub hosts: Vec<String>,
}

impl Scope {
    /// Reads the `grants` lines the host sends (`http <host>` entries).
    pub fn from_grants(workspace: Option<String>, grants: &[String]) -> Self {
        let hosts = grants
            .iter()
            .filter_map(|g| g.strip_prefix("http "))
            .map(|h| h.trim().to_ascii_lowercase())
            .collect();
        Self { workspace, hosts }
    }

    fn granted_host(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        self.hosts.iter().any(|h| {
            let h = h.split(':').next().unwrap_or(h);
            match h.strip_prefix("*.") {
                Some(domain) => host.ends_with(&format!(".{domain}")),
                None => h == host,
            }
        })
    }
}

fn re(pattern: &str) -> Regex {
    // The patterns are constants of this file, checked by the tests.
    Regex::new(pattern).unwrap_or_else(|e| panic!("rule pattern {pattern:?}: {e}"))
}

/// Files that hold credentials.
static CREDENTIAL_PATH: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(^|[\s/'=:])(\.ssh(/|\b)|id_(rsa|dsa|ecdsa|ed25519)\b|\.aws/(credentials|config)|\.netrc\b|\.git-credentials|\.docker/config\.json|\.kube/config|\.gnupg\b|\.npmrc\b|\.pypirc\b|\.pgpass\b|\.config/gcloud|\.azure/|/etc/shadow\b|/etc/gshadow\b|/etc/sudoers)",
    )
});

/// `.env` files: project secrets.
static DOTENV: LazyLock<Regex> = LazyLock::new(|| re(r"(^|[\s/'=:])\.env(\.[A-Za-z]+)?($|[\s'])"));

/// Shell start-up files (persistence).
static SHELL_RC: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(\.bashrc|\.bash_profile|\.profile|\.zshrc|\.zprofile|\.bash_login|/etc/profile|/etc/bash\.bashrc)\b",
    )
});

/// A redirection or `tee` into a system location.
static SYSTEM_WRITE: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(>>?|\btee\s+(-a\s+)?)\s*/(etc|usr|bin|sbin|boot|lib|lib64|var/lib|sys|proc)/")
});

/// A redirection onto a block device.
static DEVICE_WRITE: LazyLock<Regex> =
    LazyLock::new(|| re(r">\s*/dev/(sd[a-z]|nvme|hd[a-z]|vd[a-z]|xvd|mmcblk|disk)"));

static FORK_BOMB: LazyLock<Regex> =
    LazyLock::new(|| re(r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;?\s*:"));

/// Substituting a download into a shell: `bash <(curl …)`, `sh -c "$(wget …)"`.
static SUBSTITUTED_DOWNLOAD: LazyLock<Regex> = LazyLock::new(|| re(r"(<|\$)\(\s*(curl|wget)\b"));

static URL: LazyLock<Regex> =
    LazyLock::new(|| re(r"[A-Za-z][A-Za-z0-9+.-]*://(\[[0-9A-Fa-f:.]+\]|[^/\s:'\x22@]+)"));

const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh", "python", "python3", "perl", "ruby",
    "node", "php",
];
const DOWNLOADERS: &[&str] = &["curl", "wget", "fetch", "aria2c"];
const ESCALATION: &[&str] = &["sudo", "su", "doas", "pkexec", "runuser"];
const SHUTDOWN: &[&str] = &["shutdown", "reboot", "halt", "poweroff"];
/// Programs that only read (with no redirection on the line).
const READ_ONLY: &[&str] = &[
    "ls",
    "pwd",
    "cat",
    "head",
    "tail",
    "wc",
    "grep",
    "egrep",
    "rg",
    "ag",
    "echo",
    "printf",
    "which",
    "file",
    "stat",
    "du",
    "df",
    "tree",
    "sort",
    "uniq",
    "cut",
    "less",
    "more",
    "date",
    "whoami",
    "id",
    "uname",
    "basename",
    "dirname",
    "realpath",
    "diff",
    "cmp",
    "md5sum",
    "sha256sum",
    "true",
    "false",
    "test",
    "[",
    "jq",
    "column",
    "nl",
    "tr",
    "awk",
    "cd",
];
/// Read-only `git` subcommands.
const GIT_READ_ONLY: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "branch",
    "remote",
    "rev-parse",
    "ls-files",
    "blame",
    "describe",
    "tag",
];

/// Hosts where the cloud metadata services answer.
fn metadata_host(host: &str) -> bool {
    matches!(
        host,
        "169.254.169.254" | "metadata.google.internal" | "100.100.100.200" | "[fd00:ec2::254]"
    )
}

/// The rules for a shell command line.
pub fn shell_rules(line: &str, scope: &Scope) -> Vec<Hit> {
    let mut hits = Vec::new();
    let cmds = commands(line);
    // Every call runs in a fresh instance, so a pattern is compiled only
    // when a literal it needs is on the line.
    if (line.contains(":(") || line.contains(": (")) && FORK_BOMB.is_match(line) {
        hits.push(hit(
            "fork-bomb",
            Risk::Critical,
            Recommendation::Deny,
            0.97,
            "a fork bomb exhausts the machine's processes",
        ));
    }
    for (i, c) in cmds.iter().enumerate() {
        let shell_like = SHELLS.contains(&c.program.as_str())
            || (ESCALATION.contains(&c.program.as_str())
                && c.args.first().is_some_and(|a| SHELLS.contains(&a.as_str())));
        if shell_like && c.piped_into && i > 0 {
            let source = &cmds[i - 1];
            if DOWNLOADERS.contains(&source.program.as_str()) {
                hits.push(hit(
                    "download-piped-to-shell",
                    Risk::High,
                    Recommendation::Review,
                    0.9,
                    format!(
                        "runs what {} downloads without showing it first",
                        source.program
                    ),
                ));
            } else if source.program == "base64"
                && source.args.iter().any(|a| a == "-d" || a == "--decode")
            {
                hits.push(hit(
                    "decoded-payload-executed",
                    Risk::High,
                    Recommendation::Review,
                    0.88,
                    "runs a base64-decoded payload, hiding what it does",
                ));
            }
        }
        command_rules(c, scope, &mut hits);
    }
    if (line.contains("curl") || line.contains("wget"))
        && SUBSTITUTED_DOWNLOAD.is_match(line)
        && cmds.iter().any(|c| {
            SHELLS.contains(&c.program.as_str()) || c.program == "eval" || c.program == "source"
        })
    {
        hits.push(hit(
            "download-piped-to-shell",
            Risk::High,
            Recommendation::Review,
            0.9,
            "runs a downloaded script through a process substitution",
        ));
    }
    if line.contains("/dev/") && DEVICE_WRITE.is_match(line) {
        hits.push(hit(
            "disk-overwrite",
            Risk::Critical,
            Recommendation::Deny,
            0.95,
            "writes straight onto a disk device",
        ));
    }
    if (line.contains('>') || line.contains("tee")) && SYSTEM_WRITE.is_match(line) {
        hits.push(hit(
            "system-config-write",
            Risk::High,
            Recommendation::Review,
            0.85,
            "writes into a system directory",
        ));
    }
    if (line.contains("rc") || line.contains("profile"))
        && SHELL_RC.is_match(line)
        && (line.contains('>')
            || line.contains("tee ")
            || cmds
                .iter()
                .any(|c| matches!(c.program.as_str(), "sed" | "cp" | "mv" | "ln")))
    {
        hits.push(hit(
            "shell-startup-modified",
            Risk::High,
            Recommendation::Review,
            0.85,
            "changes a shell start-up file, which runs in every later shell",
        ));
    }
    credential_rules(line, &mut hits);
    if hits.is_empty() && !cmds.is_empty() && read_only(&cmds, line) {
        hits.push(hit(
            "read-only-commands",
            Risk::Low,
            Recommendation::Approve,
            0.9,
            "only reads: every program is a read-only one and nothing is redirected",
        ));
    }
    hits
}

/// Redirections that write nothing that matters: `2>&1`, `> /dev/null`.
static HARMLESS_REDIRECT: LazyLock<Regex> =
    LazyLock::new(|| re(r"[0-9]?>>?\s*/dev/null|[0-9]?>&[0-9]|&>\s*/dev/null"));

fn read_only(cmds: &[Command], line: &str) -> bool {
    if line.contains('>') && HARMLESS_REDIRECT.replace_all(line, "").contains('>') {
        return false;
    }
    cmds.iter().all(|c| match c.program.as_str() {
        "git" => {
            c.args
                .first()
                .is_some_and(|s| GIT_READ_ONLY.contains(&s.as_str()))
                && !c
                    .args
                    .iter()
                    .any(|a| a == "-d" || a == "-D" || a == "--delete")
        }
        "find" => !c.args.iter().any(|a| {
            matches!(
                a.as_str(),
                "-delete" | "-exec" | "-execdir" | "-ok" | "-fprint"
            )
        }),
        "awk" => !c.text.contains("system("),
        p => READ_ONLY.contains(&p),
    })
}

fn has_flag(c: &Command, short: char, long: &str) -> bool {
    c.args.iter().any(|a| {
        a == long || (a.starts_with('-') && !a.starts_with("--") && a[1..].contains(short))
    })
}

/// Targets whose recursive removal destroys the system or a home directory.
fn precious_target(t: &str) -> bool {
    let t = t.trim_end_matches('/');
    t.is_empty()
        || matches!(
            t,
            "/*" | "~"
                | "~/*"
                | "$HOME"
                | "${HOME}"
                | "$HOME/*"
                | "/home"
                | "/root"
                | "/etc"
                | "/usr"
                | "/var"
                | "/bin"
                | "/sbin"
                | "/boot"
                | "/lib"
                | "/lib64"
                | "/opt"
                | "/srv"
                | "/*/*"
                | "/."
        )
}

fn command_rules(c: &Command, scope: &Scope, hits: &mut Vec<Hit>) {
    let p = c.program.as_str();
    let targets: Vec<&String> = c.args.iter().filter(|a| !a.starts_with('-')).collect();
    match p {
        "rm" => {
            let recursive = has_flag(c, 'r', "--recursive") || has_flag(c, 'R', "--recursive");
            let force_root = c.args.iter().any(|a| a == "--no-preserve-root");
            if force_root || (recursive && targets.iter().any(|t| precious_target(t))) {
                hits.push(hit(
                    "recursive-delete-of-system-or-home",
                    Risk::Critical,
                    Recommendation::Deny,
                    0.95,
                    format!("`{}` removes the system or a home directory", c.text),
                ));
            } else if recursive {
                hits.push(hit(
                    "recursive-delete",
                    Risk::Medium,
                    Recommendation::Review,
                    0.7,
                    format!("removes directory trees: {}", join(&targets)),
                ));
            } else {
                hits.push(hit(
                    "file-delete",
                    Risk::Medium,
                    Recommendation::Review,
                    0.6,
                    format!("deletes {}", join(&targets)),
                ));
            }
            if targets
                .iter()
                .any(|t| t.contains(".bash_history") || t.contains(".zsh_history"))
            {
                hits.push(history_tampering());
            }
        }
        "dd" if c
            .args
            .iter()
            .any(|a| a.starts_with("of=/dev/") && !a.starts_with("of=/dev/null")) =>
        {
            hits.push(hit(
                "disk-overwrite",
                Risk::Critical,
                Recommendation::Deny,
                0.95,
                "dd writes onto a device",
            ));
        }
        _ if p.starts_with("mkfs")
            || matches!(p, "wipefs" | "fdisk" | "sfdisk" | "parted" | "mkswap") =>
        {
            hits.push(hit(
                "disk-overwrite",
                Risk::Critical,
                Recommendation::Deny,
                0.95,
                format!("{p} rewrites a disk or partition"),
            ));
        }
        "shred" => {
            hits.push(hit(
                "secure-delete",
                Risk::High,
                Recommendation::Review,
                0.8,
                format!("shreds {}", join(&targets)),
            ));
            if targets.iter().any(|t| t.contains("history")) {
                hits.push(history_tampering());
            }
        }
        _ if SHUTDOWN.contains(&p) => {
            hits.push(hit(
                "system-shutdown",
                Risk::Critical,
                Recommendation::Deny,
                0.9,
                format!("{p} stops the machine"),
            ));
        }
        "init" | "telinit" if targets.iter().any(|t| *t == "0" || *t == "6") => {
            hits.push(hit(
                "system-shutdown",
                Risk::Critical,
                Recommendation::Deny,
                0.9,
                "changes the runlevel to halt or reboot",
            ));
        }
        "systemctl" => {
            if targets
                .iter()
                .any(|t| matches!(t.as_str(), "poweroff" | "reboot" | "halt" | "kexec"))
            {
                hits.push(hit(
                    "system-shutdown",
                    Risk::Critical,
                    Recommendation::Deny,
                    0.9,
                    "systemctl stops the machine",
                ));
            } else if targets
                .iter()
                .any(|t| matches!(t.as_str(), "enable" | "link" | "edit"))
            {
                hits.push(hit(
                    "persistence",
                    Risk::Medium,
                    Recommendation::Review,
                    0.7,
                    "installs a service that starts on its own",
                ));
            }
        }
        _ if ESCALATION.contains(&p) => {
            hits.push(hit(
                "privilege-escalation",
                Risk::High,
                Recommendation::Review,
                0.88,
                format!("{p} runs a command with another user's (root's) rights"),
            ));
            if let Some(inner) = c.args.iter().position(|a| !a.starts_with('-')) {
                let rest = c.args[inner..].join(" ");
                for h in shell_rules(&rest, scope) {
                    if h.rule != "read-only-commands" {
                        hits.push(h);
                    }
                }
            }
        }
        "chmod" => {
            let setuid = c.args.iter().any(|a| {
                a.contains("+s")
                    || (a.len() == 4
                        && a.starts_with(['4', '2', '6'])
                        && a.chars().all(|d| d.is_ascii_digit()))
            });
            if setuid {
                hits.push(hit(
                    "setuid-bit",
                    Risk::High,
                    Recommendation::Review,
                    0.85,
                    "sets a setuid/setgid bit, a way to keep root rights",
                ));
            } else if c
                .args
                .iter()
                .any(|a| a == "777" || a == "a+rwx" || a == "o+w")
            {
                let root = targets.iter().any(|t| t.as_str() == "/");
                hits.push(if root {
                    hit(
                        "world-writable-permissions",
                        Risk::Critical,
                        Recommendation::Deny,
                        0.9,
                        "makes the whole file system writable by everyone",
                    )
                } else {
                    hit(
                        "world-writable-permissions",
                        Risk::Medium,
                        Recommendation::Review,
                        0.7,
                        "makes files writable by every user",
                    )
                });
            }
        }
        "setcap" => hits.push(hit(
            "setuid-bit",
            Risk::High,
            Recommendation::Review,
            0.85,
            "grants file capabilities, a way to keep root rights",
        )),
        "curl" | "wget" => upload_rules(c, scope, hits),
        "scp" | "rsync" | "sftp" if c.args.iter().any(|a| remote_spec(a)) => {
            hits.push(hit(
                "copy-to-remote",
                Risk::High,
                Recommendation::Review,
                0.8,
                format!("{p} copies files to or from another machine"),
            ));
        }
        "nc" | "ncat" | "netcat" | "socat" | "telnet" => {
            if has_flag(c, 'l', "--listen") || c.text.contains("LISTEN") {
                hits.push(hit(
                    "network-listener",
                    Risk::Medium,
                    Recommendation::Review,
                    0.75,
                    "opens a port that accepts connections",
                ));
            } else {
                hits.push(hit(
                    "raw-connection",
                    Risk::High,
                    Recommendation::Review,
                    0.75,
                    format!("{p} opens a raw connection (a common way to move data out or in)"),
                ));
            }
        }
        "python" | "python3"
            if c.args
                .windows(2)
                .any(|w| w[0] == "-m" && w[1] == "http.server") =>
        {
            hits.push(hit(
                "network-listener",
                Risk::Medium,
                Recommendation::Review,
                0.75,
                "serves the directory over HTTP",
            ));
        }
        "crontab" if !c.args.iter().any(|a| a == "-l") => {
            hits.push(hit(
                "persistence",
                Risk::Medium,
                Recommendation::Review,
                0.75,
                "changes scheduled tasks",
            ));
        }
        "history" if c.args.iter().any(|a| a == "-c" || a == "-w") => {
            hits.push(history_tampering())
        }
        "unset" if c.args.iter().any(|a| a == "HISTFILE") => hits.push(history_tampering()),
        "kill"
            if targets
                .iter()
                .any(|t| t.as_str() == "1" || t.as_str() == "-1") =>
        {
            hits.push(hit(
                "process-kill",
                Risk::High,
                Recommendation::Review,
                0.8,
                "signals init or every process",
            ));
        }
        "killall" | "pkill" => hits.push(hit(
            "process-kill",
            Risk::Medium,
            Recommendation::Review,
            0.65,
            format!("{p} stops processes by name"),
        )),
        "git" => git_rules(c, hits),
        "pip" | "pip3" | "npm" | "pnpm" | "yarn" | "gem" | "cargo" | "go" | "apt" | "apt-get"
        | "yum" | "dnf" | "brew" | "apk" => {
            let installing = c
                .args
                .iter()
                .any(|a| matches!(a.as_str(), "install" | "add" | "i"))
                && !(p == "npm" && c.args.len() == 1);
            let global = c.args.iter().any(|a| a == "-g" || a == "--global")
                || matches!(p, "apt" | "apt-get" | "yum" | "dnf" | "brew" | "apk");
            if installing && (global || !matches!(p, "npm" | "pnpm" | "yarn" | "cargo" | "go")) {
                hits.push(hit(
                    "package-install",
                    Risk::Medium,
                    Recommendation::Review,
                    0.6,
                    "installs packages (code from a registry runs here)",
                ));
            }
        }
        "docker" | "podman" if privileged_container(c) => {
            hits.push(hit(
                "privileged-container",
                Risk::High,
                Recommendation::Review,
                0.85,
                "starts a container with the host's rights or its root file system",
            ));
        }
        "eval" => hits.push(hit(
            "eval",
            Risk::Medium,
            Recommendation::Review,
            0.6,
            "evaluates text as a command",
        )),
        "printenv" | "env" if c.args.is_empty() => {
            hits.push(hit(
                "environment-dump",
                Risk::Medium,
                Recommendation::Review,
                0.6,
                "prints every environment variable (tokens often live there)",
            ));
        }
        _ => {}
    }
}

/// `--privileged`, the host's namespaces, or the host's root mounted.
fn privileged_container(c: &Command) -> bool {
    c.args
        .iter()
        .any(|a| a == "--privileged" || a.starts_with("--pid=host") || a.starts_with("--net=host"))
        || c.args
            .windows(2)
            .any(|w| (w[0] == "-v" || w[0] == "--volume") && w[1].starts_with("/:"))
}

fn history_tampering() -> Hit {
    hit(
        "history-tampering",
        Risk::High,
        Recommendation::Review,
        0.85,
        "erases the shell history, hiding what was run",
    )
}

fn git_rules(c: &Command, hits: &mut Vec<Hit>) {
    let sub = c.args.first().map(String::as_str).unwrap_or("");
    match sub {
        "push"
            if c.args.iter().any(|a| {
                a == "--force"
                    || a == "-f"
                    || a.starts_with("--force-with-lease")
                    || (a.starts_with('+') && a.len() > 1)
            }) =>
        {
            hits.push(hit(
                "force-push",
                Risk::Medium,
                Recommendation::Review,
                0.75,
                "rewrites the remote's history",
            ));
        }
        "reset" if c.args.iter().any(|a| a == "--hard") => {
            hits.push(hit(
                "discard-changes",
                Risk::Medium,
                Recommendation::Review,
                0.7,
                "throws away uncommitted work",
            ));
        }
        "clean" if c.args.iter().any(|a| a.starts_with('-') && a.contains('f')) => {
            hits.push(hit(
                "discard-changes",
                Risk::Medium,
                Recommendation::Review,
                0.7,
                "deletes untracked files",
            ));
        }
        "checkout" | "restore" if c.args.iter().any(|a| a == "." || a == "--") => {
            hits.push(hit(
                "discard-changes",
                Risk::Medium,
                Recommendation::Review,
                0.6,
                "overwrites local changes",
            ));
        }
        _ => {}
    }
}

/// `host:path` or `user@host:path` (not a local path with a colon).
fn remote_spec(a: &str) -> bool {
    !a.starts_with('-')
        && !a.starts_with('/')
        && !a.starts_with('.')
        && a.split_once(':')
            .is_some_and(|(h, _)| !h.is_empty() && !h.contains('/'))
}

fn upload_rules(c: &Command, scope: &Scope, hits: &mut Vec<Hit>) {
    let uploads = c.args.windows(2).any(|w| {
        matches!(
            w[0].as_str(),
            "-d" | "--data"
                | "--data-binary"
                | "--data-raw"
                | "--data-urlencode"
                | "-F"
                | "--form"
                | "--post-file"
                | "--body-file"
        ) && (w[1].contains('@') || w[0] == "--post-file" || w[0] == "--body-file")
    }) || c.args.iter().any(|a| {
        a == "-T"
            || a == "--upload-file"
            || a.starts_with("--post-file=")
            || a.starts_with("--data-binary=@")
            || a.starts_with("-d@")
    });
    if !uploads {
        return;
    }
    let hosts: Vec<String> = c
        .args
        .iter()
        .filter_map(|a| {
            URL.captures(a)
                .and_then(|m| m.get(1))
                .map(|h| h.as_str().to_ascii_lowercase())
        })
        .collect();
    let unknown: Vec<&String> = hosts.iter().filter(|h| !scope.granted_host(h)).collect();
    if hosts.is_empty() || !unknown.is_empty() {
        hits.push(hit(
            "upload-to-unknown-host",
            Risk::High,
            Recommendation::Review,
            0.85,
            format!(
                "sends local data to {}",
                if unknown.is_empty() {
                    "a host".to_string()
                } else {
                    unknown
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
        ));
    } else {
        hits.push(hit(
            "upload-to-granted-host",
            Risk::Medium,
            Recommendation::Review,
            0.6,
            format!("sends local data to {}, a granted host", hosts.join(", ")),
        ));
    }
}

/// Literals one of which a credential path contains.
const CREDENTIAL_HINTS: &[&str] = &[
    ".ssh",
    "id_",
    ".aws",
    "netrc",
    "credentials",
    ".docker",
    ".kube",
    "gnupg",
    "npmrc",
    "pypirc",
    "pgpass",
    "gcloud",
    ".azure",
    "shadow",
    "sudoers",
];

fn credential_rules(text: &str, hits: &mut Vec<Hit>) {
    let maybe = CREDENTIAL_HINTS.iter().any(|h| text.contains(h));
    if let Some(m) = maybe.then(|| CREDENTIAL_PATH.find(text)).flatten() {
        hits.push(hit(
            "credential-access",
            Risk::High,
            Recommendation::Review,
            0.85,
            format!(
                "touches a credential file ({})",
                m.as_str().trim_start_matches([' ', '/', '\'', '=', ':'])
            ),
        ));
    } else if text.contains(".env") && DOTENV.is_match(text) {
        hits.push(hit(
            "dotenv-access",
            Risk::Medium,
            Recommendation::Review,
            0.65,
            "touches a .env file (it usually holds the project's secrets)",
        ));
    }
}

fn join(ts: &[&String]) -> String {
    if ts.is_empty() {
        "files".to_string()
    } else {
        ts.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ")
    }
}

/// Whether `path` (as the tool got it) lies inside `workspace`: relative
/// paths are, unless `..` climbs out.
pub fn inside_workspace(path: &str, workspace: Option<&str>) -> bool {
    let mut depth: i64 = 0;
    let (base, rest) = if path.starts_with('/') || path.starts_with('~') {
        let Some(ws) = workspace else { return false };
        let ws = ws.trim_end_matches('/');
        match path.strip_prefix(ws) {
            Some(r) if r.is_empty() || r.starts_with('/') => (true, r),
            _ => return false,
        }
    } else {
        (true, path)
    };
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => depth += 1,
        }
    }
    base
}

/// String values of the arguments named `keys` (first found), else none.
fn arg<'a>(args: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
}

/// Every string in the arguments, joined (for tools without specific rules).
fn all_strings(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(a) => a.iter().for_each(|x| all_strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| all_strings(x, out)),
        _ => {}
    }
}

/// The rules for one call of `tool` with JSON `arguments`.
pub fn call_rules(tool: &str, arguments: &str, scope: &Scope) -> Vec<Hit> {
    let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let mut hits = Vec::new();
    if let Some(cmd) = arg(&args, &["command", "cmd", "script"]).filter(|_| is_shell_tool(tool)) {
        return shell_rules(cmd, scope);
    }
    if let Some(path) = arg(&args, &["path", "file_path", "file", "filename"]) {
        let writes = [
            "write", "edit", "create", "delete", "remove", "move", "rename", "patch", "append",
        ]
        .iter()
        .any(|w| tool.contains(w));
        credential_rules(&format!(" {path}"), &mut hits);
        if writes && SHELL_RC.is_match(path) {
            hits.push(hit(
                "shell-startup-modified",
                Risk::High,
                Recommendation::Review,
                0.85,
                format!("changes {path}, which runs in every later shell"),
            ));
        }
        if writes {
            if inside_workspace(path, scope.workspace.as_deref()) {
                if hits.is_empty() {
                    hits.push(hit(
                        "workspace-write",
                        Risk::Low,
                        Recommendation::Approve,
                        0.75,
                        format!("changes {path} inside the workspace"),
                    ));
                }
            } else {
                hits.push(hit(
                    "write-outside-workspace",
                    Risk::High,
                    Recommendation::Review,
                    0.85,
                    format!("changes {path}, outside the workspace"),
                ));
            }
        } else if hits.is_empty() && inside_workspace(path, scope.workspace.as_deref()) {
            hits.push(hit(
                "workspace-read",
                Risk::Low,
                Recommendation::Approve,
                0.8,
                format!("reads {path} inside the workspace"),
            ));
        }
        return hits;
    }
    if let Some(url) = arg(&args, &["url", "uri", "href"]) {
        let host = URL
            .captures(url)
            .and_then(|m| m.get(1))
            .map(|h| h.as_str().to_ascii_lowercase())
            .unwrap_or_default();
        if metadata_host(&host) {
            hits.push(hit(
                "cloud-metadata",
                Risk::Critical,
                Recommendation::Deny,
                0.9,
                format!("{host} is a cloud metadata service (instance credentials)"),
            ));
        } else if url.contains('@')
            && url
                .split("://")
                .nth(1)
                .is_some_and(|r| r.split('/').next().is_some_and(|a| a.contains('@')))
        {
            hits.push(hit(
                "credentials-in-url",
                Risk::Medium,
                Recommendation::Review,
                0.7,
                "the URL carries a user name or password",
            ));
        } else {
            hits.push(hit(
                "fetch-url",
                Risk::Low,
                Recommendation::Approve,
                0.6,
                format!("fetches {host}"),
            ));
        }
        return hits;
    }
    let mut text = String::new();
    all_strings(&args, &mut text);
    credential_rules(&text, &mut hits);
    if hits.is_empty() && tool.starts_with("mcp__") {
        hits.push(hit(
            "third-party-tool",
            Risk::Medium,
            Recommendation::Review,
            0.4,
            "an MCP server's tool: what it does is up to the server",
        ));
    }
    hits
}

fn is_shell_tool(tool: &str) -> bool {
    matches!(
        tool,
        "bash" | "shell" | "sh" | "exec" | "run_command" | "terminal" | "watch"
    ) || tool.ends_with("__bash")
        || tool.ends_with("__shell")
        || tool.ends_with("__run_command")
}
