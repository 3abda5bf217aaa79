//! Signed plugins from the command line: `plugins keygen`, `sign`,
//! `verify`, and `[plugins] require_signatures` refusing an unsigned or
//! tampered plugin at install and at load, with the reason in
//! `plugins list`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for d in ["ws", "cache", "plugins", "installed"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        let env = Self { dir };
        env.config("");
        env
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    fn config(&self, extra: &str) {
        let text = format!(
            "[plugins]\ndirs = [{:?}, {:?}]\ninstall_dir = {:?}\n{extra}\n",
            self.path("plugins"),
            self.path("installed"),
            self.path("installed")
        );
        std::fs::write(self.path("config.toml"), text).unwrap();
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_turnstone"))
            .arg("--builtin-dir")
            .arg(target().join("components"))
            .arg("--cache-dir")
            .arg(self.path("cache"))
            .arg("--workspace")
            .arg(self.path("ws"))
            .arg("--db")
            .arg(self.path("t.db"))
            .env("TURNSTONE_CONFIG", self.path("config.toml"))
            .env_remove("TURNSTONE_BUILTIN_PLUGINS")
            .args(args)
            .output()
            .unwrap()
    }

    /// A copy of the example word_count plugin at `plugins/<name>` (or `at`).
    fn plugin(&self, at: &str) -> PathBuf {
        let dest = self.path(at);
        std::fs::create_dir_all(&dest).unwrap();
        for f in ["plugin.toml", "word_count.wasm"] {
            std::fs::copy(
                target().join("example-plugins/word_count").join(f),
                dest.join(f),
            )
            .unwrap();
        }
        dest
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn keygen_sign_verify_and_required_signatures() {
    let env = Env::new();
    let key = env.path("signing.key");
    let out = env.run(&["plugins", "keygen", "--out", key.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let public = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(public.starts_with("ed25519:"), "{public}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the private key is the owner's alone");
    }
    let again = env.run(&["plugins", "keygen", "--out", key.to_str().unwrap()]);
    assert!(!again.status.success() && text(&again).contains("--force"));

    let src = env.plugin("src");
    let s = src.to_str().unwrap();
    let out = env.run(&["plugins", "verify", s]);
    assert!(!out.status.success());
    assert!(text(&out).contains("unsigned"), "{}", text(&out));
    let out = env.run(&["plugins", "sign", s, "--key", key.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let out = env.run(&["plugins", "verify", s, "--trusted-key", &public]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("valid signature") && text(&out).contains("(trusted)"));

    // Required, trusted: a signed install works; an unsigned or tampered one
    // is refused with the reason.
    env.config(&format!(
        "require_signatures = true\ntrusted_keys = [{public:?}]"
    ));
    let out = env.run(&["plugins", "install", s]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(env.path("installed/word_count/plugin.sig").is_file());
    let unsigned = env.plugin("unsigned");
    let out = env.run(&[
        "plugins",
        "install",
        "--replace",
        unsigned.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(text(&out).contains("signature: unsigned"), "{}", text(&out));
    let wasm = src.join("word_count.wasm");
    let mut bytes = std::fs::read(&wasm).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    std::fs::write(&wasm, &bytes).unwrap();
    let out = env.run(&["plugins", "verify", s, "--trusted-key", &public]);
    assert!(
        text(&out).contains("tampered: the component"),
        "{}",
        text(&out)
    );
    let out = env.run(&["plugins", "install", "--replace", s]);
    assert!(!out.status.success());
    assert!(text(&out).contains("signature: tampered"), "{}", text(&out));

    // At load: the installed, signed copy loads; an unsigned plugin in a
    // plugin directory is listed as failed with the reason.
    env.plugin("plugins/word_count_unsigned");
    let manifest = env.path("plugins/word_count_unsigned/plugin.toml");
    let m = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("name = \"word_count\"", "name = \"word_count_unsigned\"");
    std::fs::write(&manifest, m).unwrap();
    std::fs::rename(
        env.path("plugins/word_count_unsigned/word_count.wasm"),
        env.path("plugins/word_count_unsigned/word_count_unsigned.wasm"),
    )
    .unwrap();
    env.config(&format!(
        "require_signatures = true\ntrusted_keys = [{public:?}]"
    ));
    let out = env.run(&["plugins", "enable", "word_count"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = env.run(&["plugins", "list", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let find = |n: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == n)
            .unwrap_or_else(|| panic!("{n} missing from {v}"))
            .clone()
    };
    let bad = find("word_count_unsigned");
    assert!(
        bad["error"]
            .as_str()
            .unwrap_or_default()
            .contains("signature: unsigned"),
        "{bad}"
    );
    let good = find("word_count");
    assert_eq!(good["state"], "loaded", "{good}");
    // A malformed trusted key stops start-up with its name.
    env.config("trusted_keys = [\"rsa:nope\"]");
    let out = env.run(&["plugins", "list"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("rsa:nope"), "{}", text(&out));
}
