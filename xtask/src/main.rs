//! Build orchestration for Turnstone: `cargo xtask <command>`.
//!
//! - `build`      guest components (installing the wasm32-wasip2 target if missing) + host,
//!   then `turnstone plugins precompile` (built-ins ship precompiled)
//! - `dist`       the shipped binary: `--profile dist` (fat LTO, one codegen
//!   unit), symbols moved to `target/dist/turnstone.debug` (linked by
//!   `.gnu_debuglink`), built-ins precompiled; linked with the function
//!   order of `xtask/link-order.txt` (`link_order`)
//! - `link-order <callgrind.out>...` rewrite `xtask/link-order.txt`, the
//!   function order of the dist link, from profiles of the dist binary
//! - `run [ARGS]` build (release) and run `turnstone ARGS`
//! - `test`       build everything, then run every test (host workspace + SDK)
//! - `lint`       `cargo fmt --check` and clippy on the host and every guest workspace
//! - `bench`      run the runtime, engine and CLI start-up benchmarks
//!
//! Components are staged as `target/<set>/<plugin>/{plugin.toml, <plugin>.wasm}`:
//! `components` (built-ins, loaded by default), `example-plugins` (third-party
//! style examples) and `test-components` (test-only guests).

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

mod link_order;

const WASM_TARGET: &str = "wasm32-wasip2";

/// A guest workspace and where its plugins are staged.
struct GuestSet {
    workspace: &'static str,
    stage: &'static str,
    /// Members staged elsewhere (e.g. example plugins living beside providers).
    overrides: &'static [(&'static str, &'static str)],
}

const GUEST_SETS: &[GuestSet] = &[
    GuestSet {
        workspace: "tools",
        stage: "components",
        overrides: &[],
    },
    GuestSet {
        workspace: "guards",
        stage: "components",
        overrides: &[],
    },
    GuestSet {
        workspace: "plugins",
        stage: "components",
        overrides: &[("word_count", "example-plugins")],
    },
    GuestSet {
        workspace: "tests/guests",
        stage: "test-components",
        overrides: &[],
    },
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("$ {cmd:?}");
    let status = cmd.status().with_context(|| format!("spawning {cmd:?}"))?;
    if !status.success() {
        bail!("command failed ({status}): {cmd:?}");
    }
    Ok(())
}

fn ensure_wasm_target() -> Result<()> {
    let out = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .current_dir(root())
        .output();
    match out {
        Ok(o)
            if String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim() == WASM_TARGET) =>
        {
            Ok(())
        }
        Ok(_) => run(Command::new("rustup")
            .args(["target", "add", WASM_TARGET])
            .current_dir(root())),
        Err(e) => {
            eprintln!("rustup not found ({e}); assuming the {WASM_TARGET} target is installed");
            Ok(())
        }
    }
}

/// Members of a guest workspace: sub-directories with a plugin.toml.
fn members(ws: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(ws).with_context(|| format!("reading {}", ws.display()))? {
        let p = e?.path();
        if p.join("plugin.toml").is_file() && p.join("Cargo.toml").is_file() {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// Reads `name` and optional `component` from a plugin.toml without a TOML
/// dependency: both are simple `key = "value"` lines in the `[plugin]` table.
fn manifest_field(text: &str, key: &str) -> Option<String> {
    let mut in_plugin = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_plugin = l == "[plugin]";
            continue;
        }
        if !in_plugin {
            continue;
        }
        if let Some((k, v)) = l.split_once('=')
            && k.trim() == key
        {
            return Some(v.trim().trim_matches('"').to_string());
        }
    }
    None
}

/// The guests' rustflags: the caller's, plus flags that shorten the source
/// paths in a guest's panic locations (the crate registry's directory and
/// this checkout's become short prefixes). Those paths are read-only data in
/// the component's linear memory image, and every instance maps the image
/// and faults its pages in, so a few hundred bytes less can be a page less
/// per instance (the openai adapter's 57.4 KB image came back under 14
/// pages); and no build machine's paths ship inside a component. Set in
/// the environment, these flags replace any `rustflags` from cargo config
/// files for the guest builds (cargo reads one source), so a flag meant for
/// guests goes in `RUSTFLAGS`.
fn guest_rustflags(root: &Path) -> String {
    let mut flags: Vec<String> = match std::env::var("CARGO_ENCODED_RUSTFLAGS") {
        Ok(encoded) => encoded
            .split('\x1f')
            .filter(|f| !f.is_empty())
            .map(String::from)
            .collect(),
        Err(_) => std::env::var("RUSTFLAGS")
            .unwrap_or_default()
            .split_whitespace()
            .map(String::from)
            .collect(),
    };
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    if let Some(Ok(registries)) = cargo_home.map(|h| std::fs::read_dir(h.join("registry/src"))) {
        // Sorted: flags in another order would rebuild every guest.
        let mut dirs: Vec<PathBuf> = registries.flatten().map(|d| d.path()).collect();
        dirs.sort();
        for dir in dirs {
            flags.push(format!("--remap-path-prefix={}=/crates", dir.display()));
        }
    }
    flags.push(format!("--remap-path-prefix={}=", root.display()));
    flags.join("\x1f")
}

fn build_guests() -> Result<()> {
    ensure_wasm_target()?;
    let root = root();
    let target_dir = root.join("target/wasm");
    // Staged sets are rebuilt from scratch so a renamed or removed plugin does
    // not linger and clash with its successor.
    for set in GUEST_SETS {
        let stages = std::iter::once(set.stage).chain(set.overrides.iter().map(|(_, s)| *s));
        for stage in stages {
            let dir = root.join("target").join(stage);
            if dir.exists() {
                std::fs::remove_dir_all(&dir)
                    .with_context(|| format!("clearing {}", dir.display()))?;
            }
        }
    }
    let rustflags = guest_rustflags(&root);
    for set in GUEST_SETS {
        let ws = root.join(set.workspace);
        run(cargo()
            .env("CARGO_ENCODED_RUSTFLAGS", &rustflags)
            .args([
                "build",
                "--release",
                "--target",
                WASM_TARGET,
                "--manifest-path",
            ])
            .arg(ws.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&target_dir))?;
        for member in members(&ws)? {
            let crate_name = member
                .file_name()
                .and_then(|n| n.to_str())
                .context("member name")?
                .to_string();
            let manifest = std::fs::read_to_string(member.join("plugin.toml"))?;
            let name = manifest_field(&manifest, "name")
                .with_context(|| format!("{}: plugin.toml has no name", member.display()))?;
            let component =
                manifest_field(&manifest, "component").unwrap_or_else(|| format!("{name}.wasm"));
            let stage = set
                .overrides
                .iter()
                .find(|(m, _)| *m == crate_name)
                .map_or(set.stage, |(_, s)| *s);
            let dest = root.join("target").join(stage).join(&name);
            std::fs::create_dir_all(&dest)?;
            let built = target_dir
                .join(WASM_TARGET)
                .join("release")
                .join(format!("{}.wasm", crate_name.replace('-', "_")));
            std::fs::copy(&built, dest.join(&component))
                .with_context(|| format!("copying {}", built.display()))?;
            std::fs::copy(member.join("plugin.toml"), dest.join("plugin.toml"))?;
        }
    }
    Ok(())
}

fn build(release: bool) -> Result<()> {
    build_guests()?;
    let mut cmd = cargo();
    cmd.args(["build", "--package", "turnstone"])
        .current_dir(root());
    if release {
        cmd.arg("--release");
    }
    run(&mut cmd)?;
    // Ship the built-ins precompiled, so a first start with an empty
    // component cache does not compile them.
    let bin = root()
        .join("target")
        .join(if release { "release" } else { "debug" })
        .join("turnstone");
    precompile(&bin)
}

/// Precompiles the staged built-ins for `bin`'s engine.
fn precompile(bin: &Path) -> Result<()> {
    run(Command::new(bin)
        .arg("--builtin-dir")
        .arg(root().join("target/components"))
        .args(["plugins", "precompile"]))
}

/// The shipped binary: built with the `dist` profile, then split into a
/// stripped executable and a debug file that gdb, perf and addr2line find
/// through the `.gnu_debuglink` section.
fn dist() -> Result<()> {
    build_guests()?;
    let root = root();
    let dir = root.join("target/dist");
    let mut build = cargo();
    build
        .args(["build", "--profile", "dist", "--package", "turnstone"])
        .current_dir(&root);
    let report = dir.join("link-order.report");
    let _ = std::fs::remove_file(&report);
    // The linker variable below names this target; elsewhere dist links as
    // cargo does, without the order.
    let ordered = cfg!(all(
        target_os = "linux",
        target_arch = "x86_64",
        target_env = "gnu"
    ));
    if ordered {
        ordered_link(&root, &dir, &mut build)?;
    }
    run(&mut build)?;
    if ordered && let Ok(text) = std::fs::read_to_string(&report) {
        eprintln!("function order: {}", text.trim());
    }
    let bin = dir.join("turnstone");
    let debug = dir.join("turnstone.debug");
    // Cargo leaves a binary it did not relink as the last run stripped it;
    // splitting that again would overwrite the debug file with nothing.
    if already_split(&bin)? {
        eprintln!("{}: up to date, already split", bin.display());
        return finish_dist(&bin, &debug);
    }
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&bin)
        .arg(&debug))?;
    // The debuglink names the file only; tools look for it beside the binary.
    run(Command::new("objcopy")
        .arg("--strip-all")
        .arg("--add-gnu-debuglink=turnstone.debug")
        .arg(&bin)
        .current_dir(&dir))?;
    finish_dist(&bin, &debug)
}

/// Whether `bin` already carries a `.gnu_debuglink` (stripped by `dist`).
fn already_split(bin: &Path) -> Result<bool> {
    use object::Object;
    let data = std::fs::read(bin).with_context(|| format!("reading {}", bin.display()))?;
    let file = object::File::parse(&*data).with_context(|| format!("parsing {}", bin.display()))?;
    Ok(file.section_by_name(".gnu_debuglink").is_some())
}

fn finish_dist(bin: &Path, debug: &Path) -> Result<()> {
    precompile(bin)?;
    for file in [bin, debug] {
        let bytes = std::fs::metadata(file)
            .with_context(|| format!("reading {}", file.display()))?
            .len();
        eprintln!("{}: {:.1} MB", file.display(), bytes as f64 / 1e6);
    }
    Ok(())
}

/// Links the dist binary through this program (`link_order::link`), which
/// places the functions `xtask/link-order.txt` lists together. The list is
/// keyed by v0-demangled names, hence the mangling flag, which is set even
/// without a list so that a binary profiled to make one has v0 names. A
/// changed list forces a new link (a new fat-LTO build of the final crate):
/// cargo does not see the list, so the stale binary in `target/dist/deps` is
/// removed.
fn ordered_link(root: &Path, dir: &Path, build: &mut Command) -> Result<()> {
    const V0: &str = "-C symbol-mangling-version=v0";
    const LINKER: &str = "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER";
    // Cargo reads CARGO_ENCODED_RUSTFLAGS before RUSTFLAGS.
    if let Ok(encoded) = std::env::var("CARGO_ENCODED_RUSTFLAGS") {
        if encoded.contains("symbol-mangling-version") && !encoded.contains("=v0") {
            bail!("CARGO_ENCODED_RUSTFLAGS sets another symbol mangling; dist needs v0");
        }
        let sep = if encoded.is_empty() { "" } else { "\x1f" };
        let v0 = V0.replace(' ', "\x1f");
        build.env("CARGO_ENCODED_RUSTFLAGS", format!("{encoded}{sep}{v0}"));
    } else {
        let flags = std::env::var("RUSTFLAGS").unwrap_or_default();
        if flags.contains("symbol-mangling-version") && !flags.contains("=v0") {
            bail!("RUSTFLAGS sets another symbol mangling; dist needs v0");
        }
        build.env("RUSTFLAGS", format!("{flags} {V0}").trim());
    }
    let list = root.join(link_order::LIST);
    if !list.is_file() {
        eprintln!(
            "{}: missing; linking without a function order",
            list.display()
        );
        return Ok(());
    }
    let me = std::env::current_exe().context("locating the xtask binary")?;
    // A linker set in the environment is still the one that links.
    if let Some(linker) = std::env::var_os(LINKER) {
        build.env(link_order::ENV_LINKER, linker);
    }
    build
        .env(LINKER, &me)
        .env(link_order::ENV_LIST, &list)
        .env(link_order::ENV_REPORT, dir.join("link-order.report"));
    let wanted = std::fs::read(&list).with_context(|| format!("reading {}", list.display()))?;
    let stamp = dir.join("link-order.stamp");
    if std::fs::read(&stamp).ok().as_deref() != Some(&wanted[..]) {
        let deps = dir.join("deps");
        for entry in std::fs::read_dir(&deps).into_iter().flatten() {
            let path = entry
                .with_context(|| format!("listing {}", deps.display()))?
                .path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with("turnstone-") && path.extension().is_none() {
                std::fs::remove_file(&path)
                    .with_context(|| format!("removing {}", path.display()))?;
            }
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(&stamp, &wanted).with_context(|| format!("writing {}", stamp.display()))?;
    }
    Ok(())
}

/// `cargo xtask link-order <callgrind.out>...`: rewrites the function list
/// from profiles of the dist binary (see `link_order` and docs/server.md).
fn link_order_from(args: &[String]) -> Result<()> {
    let (binary, profiles) = match args {
        [flag, name, rest @ ..] if flag == "--binary" => (name.as_str(), rest),
        rest => ("turnstone", rest),
    };
    if profiles.is_empty() {
        bail!(
            "usage: cargo xtask link-order [--binary NAME] <callgrind.out>... \
             (recorded by xtask/link-order-profile.py: --compress-strings=no --compress-pos=no --demangle=no)"
        );
    }
    let profiles: Vec<PathBuf> = profiles.iter().map(PathBuf::from).collect();
    let out = root().join(link_order::LIST);
    let n = link_order::write_list(&profiles, binary, &out)?;
    eprintln!("{}: {n} functions", out.display());
    Ok(())
}

fn test(extra: &[String]) -> Result<()> {
    build_guests()?;
    let root = root();
    // The browser test drives headless Chromium through npm `playwright-core`.
    let browser = root.join("tests/browser");
    if !browser.join("node_modules/playwright-core").is_dir() {
        run(Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&browser))?;
    }
    install_schemathesis(&root)?;
    install_mcp_peers(&root)?;
    run(cargo()
        .args(["test", "--workspace"])
        .args(extra)
        .current_dir(&root))?;
    run(cargo()
        .args(["test", "--manifest-path"])
        .arg(root.join("sdk-guest/Cargo.toml"))
        .arg("--target-dir")
        .arg(root.join("target/sdk-native")))?;
    // Guest crates' own unit tests (pure logic such as SSE parsing), natively.
    // `--lib` skips the cdylib artifact, whose component export names a native
    // linker cannot take.
    for ws in ["tools", "guards", "plugins"] {
        run(cargo()
            .args(["test", "--workspace", "--lib", "--manifest-path"])
            .arg(root.join(ws).join("Cargo.toml"))
            .arg("--target-dir")
            .arg(root.join("target/guest-native")))?;
    }
    Ok(())
}

/// The API fuzzer (PyPI `schemathesis`, pinned with its dependencies in
/// `tests/schemathesis/requirements.txt`) in a venv under `target/`, where
/// `host/cli/tests/openapi_fuzz.rs` finds it.
fn install_schemathesis(root: &Path) -> Result<()> {
    install_pinned_venv(
        &root.join("tests/schemathesis/requirements.txt"),
        &root.join("target/schemathesis"),
        "bin/schemathesis",
    )
}

/// Real MCP peers for the MCP tests: npm `@modelcontextprotocol/server-everything`
/// (pinned in `tests/mcp/package-lock.json`, into `tests/mcp/node_modules`) and
/// the PyPI `mcp` SDK (pinned in `tests/mcp/requirements.txt`, into
/// `target/mcp-venv`), where `turnstone-test-support::mcp` finds them.
fn install_mcp_peers(root: &Path) -> Result<()> {
    let dir = root.join("tests/mcp");
    if !dir
        .join("node_modules/@modelcontextprotocol/server-everything")
        .is_dir()
    {
        run(Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir))?;
    }
    install_pinned_venv(
        &dir.join("requirements.txt"),
        &root.join("target/mcp-venv"),
        "bin/python",
    )
}

/// A venv at `venv` holding exactly the pins in `pins`; reinstalled when the
/// pins change (a stamp file records what was installed) or `probe` is missing.
fn install_pinned_venv(pins: &Path, venv: &Path, probe: &str) -> Result<()> {
    let stamp = venv.join("requirements.installed");
    let wanted = std::fs::read_to_string(pins)
        .with_context(|| format!("reading the pins in {}", pins.display()))?;
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str())
        && venv.join(probe).is_file()
    {
        return Ok(());
    }
    run(Command::new("python3").args(["-m", "venv"]).arg(venv))?;
    run(Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
        .arg(pins))?;
    std::fs::write(&stamp, wanted)?;
    Ok(())
}

fn lint() -> Result<()> {
    ensure_wasm_target()?;
    let root = root();
    run(cargo().args(["fmt", "--all", "--check"]).current_dir(&root))?;
    run(cargo()
        .args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ])
        .current_dir(&root))?;
    let guest_manifests = ["sdk-guest", "tools", "guards", "plugins", "tests/guests"];
    for ws in guest_manifests {
        let manifest = root.join(ws).join("Cargo.toml");
        run(cargo()
            .args(["fmt", "--all", "--check", "--manifest-path"])
            .arg(&manifest))?;
        run(cargo()
            .args(["clippy", "--target", WASM_TARGET, "--manifest-path"])
            .arg(&manifest)
            .arg("--target-dir")
            .arg(root.join("target/wasm"))
            .args(["--all-targets", "--", "-D", "warnings"]))?;
    }
    Ok(())
}

fn main() -> Result<()> {
    // `dist` makes this program the linker of its build (`ordered_link`);
    // a linker's first argument is a flag or a response file, never a task.
    let linking = std::env::args_os()
        .nth(1)
        .is_some_and(|a| a.to_string_lossy().starts_with(['-', '@']));
    if let (true, Some(list)) = (linking, std::env::var_os(link_order::ENV_LIST)) {
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        let code = link_order::link(Path::new(&list), &args)?;
        std::process::exit(code);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (cmd, rest) = args
        .split_first()
        .map_or(("help", &[][..]), |(c, r)| (c.as_str(), r));
    match cmd {
        "build" => build(rest.iter().any(|a| a == "--release")),
        "build-components" => build_guests(),
        "dist" => dist(),
        "link-order" => link_order_from(rest),
        "run" => {
            build(true)?;
            let rest: Vec<&String> = rest.iter().filter(|a| *a != "--").collect();
            let bin = root().join("target/release/turnstone");
            let status = Command::new(&bin).args(rest).status()?;
            std::process::exit(status.code().unwrap_or(1));
        }
        "test" => test(rest),
        "lint" => lint(),
        "bench" => {
            build_guests()?;
            run(cargo()
                .args([
                    "bench",
                    "--package",
                    "turnstone-runtime",
                    "--package",
                    "turnstone-engine",
                    "--package",
                    "turnstone",
                ])
                .args(rest)
                .current_dir(root()))
        }
        _ => {
            eprintln!(
                "usage: cargo xtask <build [--release] | build-components | dist | link-order [--binary NAME] <callgrind.out>... | run [-- ARGS] | test [CARGO TEST ARGS] | lint | bench>"
            );
            std::process::exit(2);
        }
    }
}
