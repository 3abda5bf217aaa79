//! Command hygiene before anything runs: typographic characters that models
//! like to emit are normalised, and commands matching destructive patterns are
//! refused with the reason.

use regex::Regex;
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

/// Destructive patterns and why each is refused.
const BLOCKED: &[(&str, &str)] = &[
    (
        r"(?:^|[;&|(`]|\b(?:sudo|then|do|else|exec|xargs|nohup|time)\s)\s*(?:sudo\s+)?rm\s+(-[A-Za-z]*\s+|--[a-z-]+\s+)*-[A-Za-z]*[rR][A-Za-z]*\s+(-[A-Za-z]+\s+|--[a-z-]+\s+)*(/|/\*|~|~/|\$HOME|\$\{HOME\})/?(\s|$|[;&|)])",
        "recursive removal of the root or home directory",
    ),
    (
        r"(?:^|[;&|(`]|\b(?:sudo|then|do|else|exec|xargs|nohup|time)\s)\s*(?:sudo\s+)?rm\s+(-[A-Za-z]+\s+)*--recursive\s+(-[A-Za-z]+\s+|--[a-z-]+\s+)*(/|/\*|~|\$HOME)(\s|$|[;&|)])",
        "recursive removal of the root or home directory",
    ),
    (r"--no-preserve-root", "removal with --no-preserve-root"),
    (
        r"(?:^|[;&|(`]|\b(?:sudo|then|do|else|exec|xargs|nohup|time)\s)\s*(?:sudo\s+)?mkfs(\.[a-z0-9]+)?(\s|$)",
        "formatting a filesystem (mkfs)",
    ),
    (
        r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:?\s*&\s*\}\s*;\s*:",
        "a fork bomb",
    ),
    (
        r"(?:^|[;&|(`]|\b(?:sudo|then|do|else|exec|xargs|nohup|time)\s)\s*(?:sudo\s+)?dd\s+[^;&|]*\bof=/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|md|dm-|mapper/|loop|sr)",
        "dd writing to a block device",
    ),
    (
        r">\s*/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|md|dm-)",
        "redirecting output onto a block device",
    ),
    (
        r"(?:^|[;&|(`]|\b(?:sudo|then|do|else|exec|xargs|nohup|time)\s)\s*(?:sudo\s+)?(chmod|chown)\s+(-[A-Za-z]*\s+)*-[A-Za-z]*R[A-Za-z]*\s+\S+\s+/(\s|$|[;&|)])",
        "recursively changing permissions or ownership of /",
    ),
    (
        r"(?:^|[;&|(`]|\b(?:sudo|then|do|else|exec|xargs|nohup|time)\s)\s*(?:sudo\s+)?(shutdown|reboot|halt|poweroff)(\s|$|[;&|)])",
        "shutting down or rebooting the machine",
    ),
    (
        r"(?:^|[;&|(`]|\b(?:sudo|then|do|else|exec|xargs|nohup|time)\s)\s*(?:sudo\s+)?wipefs(\s|$)",
        "wiping filesystem signatures (wipefs)",
    ),
];

fn compiled() -> &'static [(Regex, &'static str)] {
    static SET: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    SET.get_or_init(|| {
        BLOCKED
            .iter()
            .filter_map(|(pattern, why)| Regex::new(pattern).ok().map(|r| (r, *why)))
            .collect()
    })
}

/// The reason `command` is refused, if it is.
pub fn blocked(command: &str) -> Option<&'static str> {
    compiled()
        .iter()
        .find(|(r, _)| r.is_match(command))
        .map(|(_, why)| *why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        assert_eq!(compiled().len(), BLOCKED.len());
    }

    #[test]
    fn destructive_commands_are_blocked() {
        for cmd in [
            "rm -rf /",
            "rm -rf /*",
            "sudo rm -rf / ",
            "cd x && rm -fr ~",
            "rm -r -f $HOME",
            "rm --recursive /",
            "rm -rf --no-preserve-root /",
            "mkfs.ext4 /dev/sda1",
            ":(){ :|:& };:",
            "dd if=/dev/zero of=/dev/sda bs=1M",
            "echo x > /dev/nvme0n1",
            "chmod -R 777 /",
            "sudo reboot",
            "wipefs -a /dev/sdb",
        ] {
            assert!(blocked(cmd).is_some(), "{cmd:?} should be blocked");
        }
    }

    #[test]
    fn ordinary_commands_pass() {
        for cmd in [
            "rm -rf ./build",
            "rm -rf /tmp/work/x",
            "rm -rf target/",
            "ls -la /",
            "dd if=/dev/zero of=./disk.img bs=1M count=1",
            "echo done > /dev/null",
            "grep -R mkfs docs/",
            "chmod -R 755 ./bin",
            "cargo build --release",
            "echo 'shutdown the server later'",
        ] {
            assert_eq!(blocked(cmd), None, "{cmd:?} should pass");
        }
    }

    #[test]
    fn typographic_characters_become_ascii() {
        assert_eq!(
            sanitize("echo \u{201C}hi\u{201D} \u{2014}n \u{2018}x\u{2019}"),
            "echo \"hi\" -n 'x'"
        );
        assert_eq!(sanitize("ls\u{00A0}-la"), "ls -la");
    }
}
