use super::*;

fn check(cmd: &str) -> Option<String> {
    blocked(cmd, &[PathBuf::from("/srv/app")])
}

#[test]
fn destructive_commands_are_blocked() {
    for cmd in [
        "rm -rf /",
        "rm -rf /*",
        "sudo rm -rf / ",
        "cd x && rm -fr ~",
        "rm -r -f $HOME",
        "rm -rf ${HOME}/",
        "rm --recursive /",
        "rm -rf --no-preserve-root /",
        "rm -rf /.",
        "rm -rf /tmp/../",
        "mkfs.ext4 /dev/sda1",
        "mkfs -t xfs /dev/vdb",
        ":(){ :|:& };:",
        "dd if=/dev/zero of=/dev/sda bs=1M",
        "echo x > /dev/nvme0n1",
        "cat img >> /dev/mapper/root",
        "chmod -R 777 /",
        "chown -R nobody /usr",
        "sudo reboot",
        "systemctl poweroff",
        "init 0",
        "wipefs -a /dev/sdb",
        "find / -name '*.log' -delete",
    ] {
        assert!(check(cmd).is_some(), "{cmd:?} should be blocked");
    }
}

#[test]
fn removal_under_system_directories_is_blocked() {
    for cmd in [
        "rm -rf /srv/cache",
        "rm -rf /etc",
        "rm -rf /opt/",
        "rm -fr /var/lib/docker",
        "rm -rf /home/alice",
        "rm -rf -- /boot",
        "rm --recursive --force /etc/nginx",
        "rm -Rf /usr/local/lib",
        "rm -rf /srv/app/../other",
        "rm -rf ./build /usr/share/doc",
    ] {
        let why = check(cmd).unwrap_or_else(|| panic!("{cmd:?} should be blocked"));
        assert!(why.starts_with("recursive removal of"), "{cmd}: {why}");
    }
    assert_eq!(
        check("rm -rf /srv/cache").unwrap(),
        "recursive removal of /srv/cache (under the system directory /srv)"
    );
}

#[test]
fn moving_the_root_or_a_system_directory_is_blocked() {
    for cmd in [
        "mv / /tmp/root",
        "mv /* /tmp/everything",
        "mv /etc /tmp/etc-old",
        "mv /usr /usr.bak",
        "mv -t /tmp /bin",
        "mv ~ /tmp/home",
    ] {
        let why = check(cmd).unwrap_or_else(|| panic!("{cmd:?} should be blocked"));
        assert!(why.starts_with("moving "), "{cmd}: {why}");
    }
}

#[test]
fn reading_another_process_environment_is_blocked() {
    for cmd in [
        "cat /proc/1/environ",
        "cat /proc/self/environ",
        "strings /proc/$$/environ",
        "tr '\\0' '\\n' < /proc/self/task/7/environ",
        "xargs -0 -n1 < /proc/1/environ",
        "cat /proc/self/../1/environ",
        "less /proc/*/environ",
        "sed -n p --file=/proc/1/environ",
        "echo $(cat /proc/1/environ)",
    ] {
        let why = check(cmd).unwrap_or_else(|| panic!("{cmd:?} should be blocked"));
        assert!(why.contains("environment"), "{cmd}: {why}");
    }
}

#[test]
fn wrappers_and_nested_scripts_are_looked_through() {
    for cmd in [
        "sudo -u root rm -rf /srv/cache",
        "sudo -E -- rm -rf /",
        "env FOO=1 rm -rf /",
        "env -i PATH=/bin rm -rf /etc",
        "env -S 'rm -rf /'",
        "FOO=bar /sbin/reboot",
        "nice -n 10 rm -rf /etc",
        "nice -5 reboot",
        "timeout 5 reboot",
        "timeout -s KILL 5s rm -rf /",
        "nohup rm -rf / &",
        "xargs -0 rm -rf /",
        "watch -n 1 reboot",
        "command rm -rf /",
        "\\rm -rf /etc",
        "'rm' -rf /",
        "/bin/rm -rf /",
        "bash -c 'rm -rf /srv/x'",
        "bash -o pipefail -c 'reboot'",
        "sh -ec \"reboot\"",
        "eval 'mkfs.ext4 /dev/sda1'",
        "echo $(reboot)",
        "x=`rm -rf /`",
        "diff <(rm -rf /) b",
        "if true; then rm -rf /; fi",
        "(cd /tmp && rm -rf /)",
        "ls | xargs rm -rf /etc",
    ] {
        assert!(check(cmd).is_some(), "{cmd:?} should be blocked");
    }
}

#[test]
fn ordinary_commands_pass() {
    for cmd in [
        "rm -rf ./build",
        "rm -rf /tmp/work/x",
        "rm -rf /var/tmp/build",
        "rm -rf target/",
        "rm -rf srv",
        "rm -rf ./srv/cache",
        "rm -rf /srv/app/build",
        "rm -rf ~/.cache/pip",
        "rm /etc/hosts.bak",
        "ls -la /",
        "ls /proc/1/",
        "cat /proc/self/status",
        "grep -r environ src/",
        "dd if=/dev/zero of=./disk.img bs=1M count=1",
        "echo done > /dev/null",
        "grep -R mkfs docs/",
        "chmod -R 755 ./bin",
        "chmod 644 /etc/app.conf",
        "cargo build --release",
        "echo 'shutdown the server later'",
        "echo asphalt",
        "echo reboot",
        "git commit -m 'reboot the docs'",
        "git commit -m \"rm -rf / is dangerous\"",
        "make mkfs-tool",
        "echo 'rm -rf /'",
        "cat <<EOF > notes.md\nrm -rf /\nreboot\nEOF",
        "mv /etc/a.conf /etc/b.conf",
        "mv -t /usr/local/bin tool",
        "find . -name '*.o' -delete",
        "find / -name passwd",
        "systemctl status nginx",
        "docker run --rm -v /srv:/srv img",
        "bash script.sh",
        "sh -c 'ls -la'",
        "sudo apt-get install -y jq",
        "xargs -I{} echo {}",
        "timeout 10 cargo test",
        "# rm -rf / would be bad\nls",
    ] {
        assert_eq!(check(cmd), None, "{cmd:?} should pass");
    }
}

#[test]
fn the_workspace_is_never_a_system_path() {
    let ws = [PathBuf::from("/home/alice/project")];
    assert_eq!(blocked("rm -rf /home/alice/project/target", &ws), None);
    assert!(blocked("rm -rf /home/alice", &ws).is_some());
    assert!(blocked("rm -rf /home/alice/project/../../bob", &ws).is_some());
}

#[test]
fn hostile_input_terminates() {
    let nested = format!("{}rm -rf /{}", "bash -c '".repeat(50), "'".repeat(50));
    let _ = check(&nested);
    let _ = check(&"$(".repeat(5000));
    let _ = check(&"eval ".repeat(5000));
}

#[test]
fn typographic_characters_become_ascii() {
    assert_eq!(
        sanitize("echo \u{201C}hi\u{201D} \u{2014}n \u{2018}x\u{2019}"),
        "echo \"hi\" -n 'x'"
    );
    assert_eq!(sanitize("ls\u{00A0}-la"), "ls -la");
}
