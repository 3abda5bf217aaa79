//! Command hygiene before anything runs: typographic characters that models
//! like to emit are normalised, and commands that would destroy the machine
//! or read other processes' secrets are refused with the reason.
//!
//! The rules look at what would run, not at text: the command line is split
//! into simple commands ([`crate::shell`]), wrappers such as `sudo`, `env`,
//! `xargs` or `timeout` are looked through, `bash -c`/`eval` scripts are
//! checked in turn, and each rule matches a command name and its arguments.
//! So `echo asphalt`, `git commit -m 'reboot the docs'` and `make mkfs-tool`
//! pass, while `sudo -u root rm -rf /srv/cache` does not. The rules and their
//! reasons are listed in docs/bash-guard.md. The guard is a seatbelt against
//! a model's mistakes, not a sandbox: the operator's grants are the boundary.

use crate::shell::{self, SimpleCommand};
use regex::Regex;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

/// Replaces curly quotes, en/em dashes and non-breaking spaces with their
/// ASCII forms (a model's `rm —force` or `echo “hi”` would otherwise fail).
pub fn sanitize(command: &str) -> String {
    command
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{2032}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{2033}' => '"',
            '\u{2013}' | '\u{2014}' | '\u{2212}' => '-',
            '\u{00A0}' | '\u{2007}' | '\u{202F}' => ' ',
            other => other,
        })
        .collect()
}

/// Top-level directories of the operating system (Linux and macOS): removing
/// anything under them, or moving them, breaks the machine.
const SYSTEM_DIRS: &[&str] = &[
    "bin",
    "boot",
    "dev",
    "etc",
    "home",
    "lib",
    "lib32",
    "lib64",
    "libx32",
    "media",
    "mnt",
    "opt",
    "proc",
    "root",
    "run",
    "sbin",
    "snap",
    "srv",
    "sys",
    "usr",
    "var",
    "Applications",
    "Library",
    "System",
    "Users",
    "Volumes",
    "private",
    "cores",
];

/// Scratch space inside system directories, where removal is routine.
const SCRATCH: &[&str] = &["/var/tmp", "/dev/shm", "/private/tmp", "/private/var/tmp"];

/// Block-device name prefixes under `/dev`.
const BLOCK_DEVICES: &[&str] = &[
    "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "md", "dm-", "mapper/", "loop", "sr",
];

/// How deep `bash -c`/`eval` scripts are followed.
const MAX_SCRIPT_DEPTH: usize = 4;

/// The reason `command` is refused, if it is. `allowed` are the workspace and
/// working directory: paths inside them are never "system" paths, even when
/// the workspace itself lives under `/srv` or `/home`.
pub fn blocked(command: &str, allowed: &[PathBuf]) -> Option<String> {
    static FORK_BOMB: OnceLock<Option<Regex>> = OnceLock::new();
    let bomb = FORK_BOMB
        .get_or_init(|| Regex::new(r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:?\s*&\s*\}\s*;\s*:").ok());
    if bomb.as_ref().is_some_and(|r| r.is_match(command)) {
        return Some("a fork bomb".into());
    }
    check_script(command, allowed, 0)
}

fn check_script(script: &str, allowed: &[PathBuf], depth: usize) -> Option<String> {
    if depth > MAX_SCRIPT_DEPTH {
        return None;
    }
    shell::commands(script)
        .iter()
        .find_map(|c| check_command(c, allowed, depth))
}

fn check_command(cmd: &SimpleCommand, allowed: &[PathBuf], depth: usize) -> Option<String> {
    for r in &cmd.redirects {
        if let Some(why) = environ_path(&r.target) {
            return Some(why);
        }
        if r.writes() && is_block_device(&r.target) {
            return Some(format!(
                "redirecting output onto the block device {}",
                r.target
            ));
        }
    }
    for w in &cmd.words {
        let value = w.split_once('=').map_or(w.as_str(), |(_, v)| v);
        if let Some(why) = environ_path(w).or_else(|| environ_path(value)) {
            return Some(why);
        }
    }
    let argv = unwrap_wrappers(&cmd.words, allowed, depth)?;
    match argv {
        Argv::Script(why) => why,
        Argv::Command(argv) => rules(argv, allowed, depth),
    }
}

enum Argv<'a> {
    /// The command to judge.
    Command(&'a [String]),
    /// A wrapper ran a script (`env -S`): its verdict.
    Script(Option<String>),
}

/// Option letters that take a value, per wrapper (short, long).
fn wrapper_options(name: &str) -> Option<(&'static str, &'static [&'static str])> {
    Some(match name {
        "sudo" => (
            "ughpCDrtUT",
            &[
                "user",
                "group",
                "host",
                "prompt",
                "close-from",
                "chdir",
                "role",
                "type",
                "other-user",
                "command-timeout",
            ],
        ),
        "doas" => ("uC", &[]),
        "env" => ("uCS", &["unset", "chdir", "split-string"]),
        "nice" => ("n", &["adjustment"]),
        "ionice" => ("cnt", &["class", "classdata"]),
        "timeout" => ("sk", &["signal", "kill-after"]),
        "stdbuf" => ("ioe", &["input", "output", "error"]),
        "nohup" | "builtin" | "command" | "exec" | "time" => ("a", &[]),
        "xargs" => (
            "IinPdLlsEea",
            &[
                "replace",
                "max-args",
                "max-procs",
                "delimiter",
                "max-lines",
                "max-chars",
                "eof",
                "arg-file",
            ],
        ),
        "watch" => ("ndq", &["interval", "differences"]),
        _ => return None,
    })
}

fn is_assignment(w: &str) -> bool {
    w.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

fn base_name(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
}

/// Skips leading assignments and wrapper commands; returns what really runs.
fn unwrap_wrappers<'a>(words: &'a [String], allowed: &[PathBuf], depth: usize) -> Option<Argv<'a>> {
    let mut rest = words;
    loop {
        while rest.first().is_some_and(|w| is_assignment(w)) {
            rest = &rest[1..];
        }
        let name = base_name(rest.first()?);
        let Some((short, long)) = wrapper_options(name) else {
            return Some(Argv::Command(rest));
        };
        let args = &rest[1..];
        let mut i = 0;
        while i < args.len() {
            let a = args[i].as_str();
            if a == "--" {
                i += 1;
                break;
            }
            if let Some(opt) = a.strip_prefix("--") {
                let (key, inline) = opt
                    .split_once('=')
                    .map_or((opt, None), |(k, v)| (k, Some(v)));
                if name == "env" && key == "split-string" {
                    let script = inline.or(args.get(i + 1).map(String::as_str)).unwrap_or("");
                    return Some(Argv::Script(check_script(script, allowed, depth + 1)));
                }
                i += if long.contains(&key) && inline.is_none() {
                    2
                } else {
                    1
                };
                continue;
            }
            if a.len() > 1
                && a.starts_with('-')
                && !(name == "nice" && a[1..].parse::<i32>().is_ok())
            {
                let letters: Vec<char> = a[1..].chars().collect();
                let mut skip = 1;
                for (k, c) in letters.iter().enumerate() {
                    if short.contains(*c) {
                        let attached: String = letters[k + 1..].iter().collect();
                        if name == "env" && *c == 'S' {
                            let script = if attached.is_empty() {
                                args.get(i + 1).map(String::as_str).unwrap_or("")
                            } else {
                                attached.as_str()
                            };
                            return Some(Argv::Script(check_script(script, allowed, depth + 1)));
                        }
                        if attached.is_empty() {
                            skip = 2;
                        }
                        break;
                    }
                }
                i += skip;
                continue;
            }
            if name == "nice" && a.starts_with('-') {
                i += 1;
                continue;
            }
            break;
        }
        let mut next = &args[i.min(args.len())..];
        // `timeout DURATION CMD`.
        if name == "timeout" && !next.is_empty() {
            next = &next[1..];
        }
        rest = next;
    }
}

/// The rules, on a command with wrappers removed.
fn rules(argv: &[String], allowed: &[PathBuf], depth: usize) -> Option<String> {
    let name = base_name(argv.first()?);
    let args = &argv[1..];
    match name {
        "rm" => rm(args, allowed),
        "mv" => mv(args),
        "chmod" | "chown" | "chgrp" => {
            let recursive =
                flags(args).any(|f| f == "-R" || f == "--recursive" || short_has(f, 'R'));
            let target = operands(args).find_map(|p| danger(p, allowed));
            match (recursive, target) {
                (true, Some(d)) => Some(format!(
                    "recursively changing permissions or ownership of {d}"
                )),
                _ => None,
            }
        }
        "find" => {
            let roots = args
                .iter()
                .take_while(|a| !a.starts_with('-') && *a != "(" && *a != "!");
            let deletes = args.iter().any(|a| a == "-delete");
            match roots.filter_map(|p| danger(p, allowed)).next() {
                Some(d) if deletes => Some(format!("deleting with find under {d}")),
                _ => None,
            }
        }
        "dd" => args
            .iter()
            .filter_map(|a| a.strip_prefix("of="))
            .find(|t| is_block_device(t))
            .map(|t| format!("dd writing to the block device {t}")),
        "mkfs" | "mke2fs" => Some("formatting a filesystem (mkfs)".into()),
        n if n.starts_with("mkfs.") => Some("formatting a filesystem (mkfs)".into()),
        "wipefs" | "blkdiscard" => Some(format!("wiping a block device ({name})")),
        "shutdown" | "reboot" | "halt" | "poweroff" => {
            Some("shutting down or rebooting the machine".into())
        }
        "systemctl"
            if operands(args).next().is_some_and(|a| {
                matches!(a, "poweroff" | "reboot" | "halt" | "kexec" | "soft-reboot")
            }) =>
        {
            Some("shutting down or rebooting the machine".into())
        }
        "init" | "telinit" if operands(args).next().is_some_and(|a| a == "0" || a == "6") => {
            Some("shutting down or rebooting the machine".into())
        }
        "bash" | "sh" | "dash" | "zsh" | "ksh" | "ash" | "fish" => {
            // `bash -c SCRIPT` / `bash -ec SCRIPT`: the script is what runs.
            let mut it = args.iter();
            while let Some(a) = it.next() {
                if a == "-o" || a == "+o" {
                    it.next();
                    continue;
                }
                if a.starts_with('-') && !a.starts_with("--") && a.contains('c') {
                    let script = it.find(|s| !s.starts_with('-'))?;
                    return check_script(script, allowed, depth + 1);
                }
                if !a.starts_with('-') {
                    return None;
                }
            }
            None
        }
        "eval" => check_script(&args.join(" "), allowed, depth + 1),
        _ => None,
    }
}

fn short_has(flag: &str, letter: char) -> bool {
    flag.len() > 1 && flag.starts_with('-') && !flag.starts_with("--") && flag[1..].contains(letter)
}

/// Options before `--`.
fn flags(args: &[String]) -> impl Iterator<Item = &str> {
    args.iter()
        .map(String::as_str)
        .take_while(|a| *a != "--")
        .filter(|a| a.starts_with('-') && a.len() > 1)
}

/// Non-option arguments (everything after `--`).
fn operands(args: &[String]) -> impl Iterator<Item = &str> {
    let mut after = false;
    args.iter().map(String::as_str).filter(move |a| {
        if after {
            return true;
        }
        if *a == "--" {
            after = true;
            return false;
        }
        !(a.starts_with('-') && a.len() > 1)
    })
}

fn rm(args: &[String], allowed: &[PathBuf]) -> Option<String> {
    if flags(args).any(|f| f == "--no-preserve-root") {
        return Some("removal with --no-preserve-root".into());
    }
    let recursive =
        flags(args).any(|f| f == "--recursive" || short_has(f, 'r') || short_has(f, 'R'));
    if !recursive {
        return None;
    }
    operands(args)
        .find_map(|p| danger(p, allowed))
        .map(|d| format!("recursive removal of {d}"))
}

fn mv(args: &[String]) -> Option<String> {
    let mut ops: Vec<&str> = Vec::new();
    let mut target_dir = false;
    let mut after = false;
    let mut it = args.iter().map(String::as_str);
    while let Some(a) = it.next() {
        if after {
            ops.push(a);
        } else if a == "--" {
            after = true;
        } else if a == "-t" || a == "--target-directory" {
            target_dir = true;
            it.next();
        } else if a.starts_with("--target-directory=") || (a.starts_with("-t") && a.len() > 2) {
            target_dir = true;
        } else if !(a.starts_with('-') && a.len() > 1) {
            ops.push(a);
        }
    }
    let sources = if target_dir || ops.len() < 2 {
        &ops[..]
    } else {
        &ops[..ops.len() - 1]
    };
    sources.iter().find_map(|p| {
        let d = danger(p, &[])?;
        let whole = match classify(p)? {
            Target::Root | Target::Home => true,
            Target::Path(path) => path.components().count() <= 2,
        };
        whole.then(|| format!("moving {d}"))
    })
}

enum Target {
    Root,
    Home,
    Path(PathBuf),
}

/// What a path argument names, with `.`/`..` resolved lexically and a
/// trailing `*` standing for its directory (`/*` is the root).
fn classify(word: &str) -> Option<Target> {
    let home_rest = ["~", "$HOME", "${HOME}"]
        .iter()
        .find_map(|h| word.strip_prefix(h));
    let (base, rest) = match home_rest {
        Some(r) if r.is_empty() || r.starts_with('/') => (None, r),
        Some(_) => return None,
        None if word.starts_with('/') => (Some(PathBuf::from("/")), word),
        None => return None,
    };
    let mut parts: Vec<&str> = Vec::new();
    for c in Path::new(rest).components() {
        match c {
            Component::Normal(n) => parts.push(n.to_str().unwrap_or("")),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    if parts.last().is_some_and(|p| p.chars().all(|c| c == '*')) {
        parts.pop();
    }
    Some(match base {
        None if parts.is_empty() => Target::Home,
        None => return None,
        Some(_) if parts.is_empty() => Target::Root,
        Some(root) => Target::Path(parts.iter().fold(root, |p, c| p.join(c))),
    })
}

/// Why removing or moving `word` is dangerous, if it is.
fn danger(word: &str, allowed: &[PathBuf]) -> Option<String> {
    match classify(word)? {
        Target::Root => Some("the root directory".into()),
        Target::Home => Some("the home directory".into()),
        Target::Path(path) => {
            if allowed
                .iter()
                .any(|a| !a.as_os_str().is_empty() && path.starts_with(a))
            {
                return None;
            }
            if SCRATCH.iter().any(|s| path.starts_with(s)) {
                return None;
            }
            let top = path.components().nth(1)?.as_os_str().to_str()?.to_string();
            SYSTEM_DIRS.contains(&top.as_str()).then(|| {
                if path.components().count() == 2 {
                    format!("the system directory /{top}")
                } else {
                    format!("{} (under the system directory /{top})", path.display())
                }
            })
        }
    }
}

fn is_block_device(target: &str) -> bool {
    target
        .strip_prefix("/dev/")
        .is_some_and(|d| BLOCK_DEVICES.iter().any(|b| d.starts_with(b)))
}

/// `/proc/PID/environ` (and `/proc/PID/task/TID/environ`): another process's
/// environment, where credentials live.
fn environ_path(word: &str) -> Option<String> {
    let Some(Target::Path(p)) = classify(word) else {
        return None;
    };
    let parts: Vec<&str> = p.iter().filter_map(|c| c.to_str()).skip(1).collect();
    let hit = matches!(
        parts.as_slice(),
        ["proc", _, "environ"] | ["proc", _, "task", _, "environ"]
    );
    hit.then(|| {
        format!(
            "reading a process's environment ({}), which holds its secrets",
            p.display()
        )
    })
}

#[cfg(test)]
mod tests;
