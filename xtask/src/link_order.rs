//! A link-time function order for the shipped binary (issue 21, idle memory).
//!
//! The kernel maps an executable's code in pieces: 64 KB around each touched
//! page (fault-around), or a whole large folio when the page cache holds the
//! file in large folios. The code a server runs at start and while idle is
//! spread over the whole `.text`, so most of it becomes resident although
//! little of it runs. Placing the functions a profiled run executed next to
//! each other makes the resident part about the size of the code that runs.
//!
//! `cargo xtask link-order <callgrind.out>...` turns callgrind profiles of the
//! dist binary into `xtask/link-order.txt`: one hash per executed function,
//! where the hash is of the symbol's demangled name without crate hashes
//! (`-C symbol-mangling-version=v0`, shown with `{:#}`), so the list stays
//! valid across dependency updates that change every mangled name.
//! `cargo xtask dist` links through this binary (`link`), which maps the hashes
//! back to the mangled names of the objects being linked and passes lld a
//! `--symbol-ordering-file`. Functions the list does not name, or names that
//! no longer exist, only lose their place: the order never changes behaviour.

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The committed list, relative to the repository root.
pub const LIST: &str = "xtask/link-order.txt";

/// Set by `dist` for the linker invocations it makes; names the list.
pub const ENV_LIST: &str = "TURNSTONE_LINK_ORDER";

/// Where the linker step reports how many listed functions it placed.
pub const ENV_REPORT: &str = "TURNSTONE_LINK_ORDER_REPORT";

/// The list's key for a symbol: 16 hex digits of the SHA-256 of its demangled
/// name without hashes. Names that do not demangle (C functions) are taken
/// as they are.
fn key(symbol: &str) -> String {
    let name = match rustc_demangle::try_demangle(symbol) {
        Ok(d) => format!("{d:#}"),
        Err(_) => symbol.to_string(),
    };
    hex::encode(&Sha256::digest(name.as_bytes())[..8])
}

/// Reads the list: keys in order, comments (`#`) and blank lines skipped.
fn read_list(path: &Path) -> Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect())
}

/// Functions of `binary` that the callgrind profiles executed, first
/// profile first; within a profile by self cost, highest first.
///
/// The profiles must be written with `--compress-strings=no`,
/// `--compress-pos=no` and `--demangle=no`, so that names are the symbols
/// themselves (what `xtask/link-order-profile.py` does), from a binary built
/// by `cargo xtask dist` (v0 mangling).
pub fn executed(profiles: &[PathBuf], binary: &str) -> Result<Vec<String>> {
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    for profile in profiles {
        let text = std::fs::read_to_string(profile)
            .with_context(|| format!("reading {}", profile.display()))?;
        let cost = self_costs(&text, binary)
            .with_context(|| format!("reading the profile {}", profile.display()))?;
        let mut names: Vec<(&str, u64)> = cost.into_iter().collect();
        names.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        for (name, _) in names {
            let k = key(name);
            if seen.insert(k.clone()) {
                order.push(k);
            }
        }
    }
    Ok(order)
}

/// Self cost (the first event) of each function of `binary` in one
/// callgrind profile.
fn self_costs<'a>(text: &'a str, binary: &str) -> Result<HashMap<&'a str, u64>> {
    let mut cost: HashMap<&str, u64> = HashMap::new();
    // Cost lines start with one column per position (`positions: line` is
    // one, `instr line` two), then one per event.
    let mut positions = 1;
    let mut in_binary = false;
    let mut current: Option<&str> = None;
    let mut call_cost_next = false;
    for line in text.lines() {
        if let Some(p) = line.strip_prefix("positions:") {
            positions = p.split_whitespace().count().max(1);
        } else if let Some(ob) = line.strip_prefix("ob=") {
            in_binary = Path::new(ob).file_name().is_some_and(|f| f == binary);
        } else if let Some(name) = line.strip_prefix("fn=") {
            call_cost_next = false;
            let compressed = name
                .strip_prefix('(')
                .and_then(|r| r.split_once(')'))
                .is_some_and(|(id, _)| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()));
            if compressed {
                bail!("compressed names; record with --compress-strings=no");
            }
            // `0x…` is code without a symbol, `(below main)` and the like
            // are valgrind's own names: neither is in the objects. `f'2` is
            // callgrind's name for a recursive call of `f`.
            let name = name.split_once('\'').map_or(name, |(base, _)| base);
            let symbol = !name.starts_with("0x") && !name.starts_with('(');
            current = (in_binary && symbol).then_some(name);
            if let Some(name) = current {
                cost.entry(name).or_default();
            }
        } else if line.starts_with("calls=") {
            // The next cost line is the call's inclusive cost, not self.
            call_cost_next = true;
        } else if line.starts_with(|c: char| c.is_ascii_digit() || "+-*".contains(c)) {
            if std::mem::take(&mut call_cost_next) {
                continue;
            }
            let Some(name) = current else { continue };
            let ir = line
                .split_whitespace()
                .nth(positions)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            *cost.entry(name).or_default() += ir;
        }
    }
    if cost.is_empty() {
        bail!("no function of {binary} in it");
    }
    if !cost.keys().any(|n| n.starts_with("_R")) {
        bail!(
            "no v0-mangled names of {binary} in it: profile a binary built by \
             `cargo xtask dist`, recorded with --demangle=no"
        );
    }
    Ok(cost)
}

/// Writes the list made from `profiles` to `out`.
pub fn write_list(profiles: &[PathBuf], binary: &str, out: &Path) -> Result<usize> {
    let keys = executed(profiles, binary)?;
    let mut text = String::from(
        "# Functions the shipped binary ran in the profiles this list was made\n\
         # from, profile by profile in the order given (the code that serves\n\
         # turns, then start-up's), each profile's hottest first: hashes of\n\
         # v0-demangled names without crate hashes. Made by\n\
         # `cargo xtask link-order`; read by `cargo xtask dist`. See\n\
         # xtask/src/link_order.rs and docs/server.md (\"Function order\").\n",
    );
    for k in &keys {
        text.push_str(k);
        text.push('\n');
    }
    std::fs::write(out, text).with_context(|| format!("writing {}", out.display()))?;
    Ok(keys.len())
}

/// The arguments rustc passed, with `@file` response files expanded.
fn expanded(args: &[OsString]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for a in args {
        let a = a.to_string_lossy();
        match a.strip_prefix('@') {
            Some(file) => {
                let text = std::fs::read_to_string(file)
                    .with_context(|| format!("reading response file {file}"))?;
                out.extend(text.lines().map(unescape));
            }
            None => out.push(a.into_owned()),
        }
    }
    Ok(out)
}

/// rustc escapes `\`, quotes and whitespace in GNU response files with `\`.
fn unescape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Defined function symbols of an object or of every object in an archive.
fn function_symbols(path: &Path, out: &mut Vec<String>) -> Result<()> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut add = |bytes: &[u8]| {
        // Archive members that are not objects (rmeta, bitcode) are skipped.
        if let Ok(file) = object::File::parse(bytes) {
            for s in file.symbols() {
                if s.is_definition()
                    && s.kind() == SymbolKind::Text
                    && let Ok(name) = s.name()
                {
                    out.push(name.to_string());
                }
            }
        }
    };
    if data.starts_with(b"!<arch>\n") {
        let archive = object::read::archive::ArchiveFile::parse(&*data)
            .with_context(|| format!("parsing archive {}", path.display()))?;
        for member in archive.members() {
            let member = member.with_context(|| format!("reading {}", path.display()))?;
            if let Ok(bytes) = member.data(&*data) {
                add(bytes);
            }
        }
    } else {
        add(&data);
    }
    Ok(())
}

/// Set by `dist` when a linker was configured before it put itself there.
pub const ENV_LINKER: &str = "TURNSTONE_LINK_ORDER_LINKER";

/// Acts as the linker: runs the configured linker (`cc` unless `dist` found
/// another) with rustc's arguments, adding the ordering for the `turnstone`
/// executable. Anything that goes wrong with the order only costs the order.
pub fn link(list: &Path, args: &[OsString]) -> Result<i32> {
    let linker = std::env::var_os(ENV_LINKER).unwrap_or_else(|| "cc".into());
    let mut cmd = Command::new(&linker);
    cmd.args(args);
    let words = expanded(args)?;
    if let Some(output) = ordered_output(&words) {
        match order_flags(list, &words, &output) {
            Ok(flags) => {
                cmd.args(flags);
            }
            Err(e) => eprintln!(
                "warning: linking {} without a function order: {e:#}",
                output.display()
            ),
        }
    }
    let status = cmd
        .status()
        .with_context(|| format!("running {}", Path::new(&linker).display()))?;
    Ok(status.code().unwrap_or(1))
}

/// The output of a link that gets the order: the `turnstone` executable
/// (`deps/turnstone-<hash>`), not build scripts or proc-macros.
fn ordered_output(words: &[String]) -> Option<PathBuf> {
    let output = words
        .iter()
        .position(|w| w == "-o")
        .and_then(|i| words.get(i + 1))
        .map(PathBuf::from)?;
    let name = output.file_name()?.to_str()?;
    (name.starts_with("turnstone-") && !name.ends_with(".so")).then_some(output)
}

/// The linker flags that apply the order, after writing the ordering file
/// beside `output`; reports how much of the list was found.
fn order_flags(list: &Path, words: &[String], output: &Path) -> Result<Vec<String>> {
    // `--symbol-ordering-file` is lld's; rustc asks for its bundled lld so.
    if !words.iter().any(|w| w == "-fuse-ld=lld") {
        bail!("the link does not use lld");
    }
    let ordering = output.with_extension("symbol-order");
    let found = ordering_file(list, words, &ordering)?;
    let line = format!(
        "{} of {} listed functions found, {} symbols placed",
        found.matched, found.listed, found.placed
    );
    if found.matched * 5 < found.listed * 4 {
        eprintln!(
            "warning: function order: only {line}; regenerate {} (docs/server.md, \"Function order\")",
            list.display()
        );
    }
    if let Some(report) = std::env::var_os(ENV_REPORT) {
        std::fs::write(&report, format!("{line}\n"))
            .with_context(|| format!("writing {}", Path::new(&report).display()))?;
    }
    // `-Xlinker` passes the path whole, even with a comma in it.
    Ok(vec![
        "-Xlinker".into(),
        "--symbol-ordering-file".into(),
        "-Xlinker".into(),
        ordering.display().to_string(),
        "-Xlinker".into(),
        "--no-warn-symbol-ordering".into(),
    ])
}

/// How much of the list an ordering file covers.
#[derive(Debug, PartialEq, Eq)]
struct Found {
    /// List entries with at least one symbol in the objects.
    matched: usize,
    /// List entries.
    listed: usize,
    /// Symbols written (one entry can name several, e.g. the same function
    /// from two versions of a crate).
    placed: usize,
}

/// Writes lld's ordering file for the objects among `words`: the mangled
/// names of listed functions, in list order.
fn ordering_file(list: &Path, words: &[String], out: &Path) -> Result<Found> {
    let keys = read_list(list)?;
    let mut symbols = Vec::new();
    for w in words {
        let p = Path::new(w);
        let is_input = [".o", ".rlib", ".a"].iter().any(|ext| w.ends_with(ext));
        if is_input && !w.starts_with('-') && p.is_file() {
            function_symbols(p, &mut symbols)?;
        }
    }
    let mut by_key: HashMap<String, Vec<String>> = HashMap::new();
    for s in symbols {
        by_key.entry(key(&s)).or_default().push(s);
    }
    let mut text = String::new();
    let (mut matched, mut placed) = (0, 0);
    for k in &keys {
        if let Some(names) = by_key.remove(k) {
            matched += 1;
            for n in names {
                text.push_str(&n);
                text.push('\n');
                placed += 1;
            }
        }
    }
    std::fs::write(out, text).with_context(|| format!("writing {}", out.display()))?;
    Ok(Found {
        matched,
        listed: keys.len(),
        placed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_ignore_crate_hashes_but_not_generic_arguments() {
        // Two builds of one function: the v0 crate disambiguators differ.
        let a = "_RNvCsabc_7mycrate3foo";
        let b = "_RNvCsxyz_7mycrate3foo";
        assert_eq!(format!("{:#}", rustc_demangle::demangle(a)), "mycrate::foo");
        assert_eq!(key(a), key(b));
        let c = "_RNvCsabc_7mycrate3bar";
        assert_ne!(key(a), key(c));
        // foo::<u32> and foo::<u8>: one generic function, two instances.
        assert_ne!(
            key("_RINvCsabc_7mycrate3foomE"),
            key("_RINvCsabc_7mycrate3foohE")
        );
        assert_eq!(
            key("_RINvCsabc_7mycrate3foomE"),
            key("_RINvCsxyz_7mycrate3foomE")
        );
        // Legacy names: the trailing hash goes too.
        assert_eq!(
            key("_ZN7mycrate3foo17h0123456789abcdefE"),
            key("_ZN7mycrate3foo17hfedcba9876543210E")
        );
        assert_eq!(key("sqlite3_step").len(), 16);
        assert_ne!(key("sqlite3_step"), key("sqlite3_prepare"));
    }

    const HOT: &str = "_RNvCs1_4demo8hot_loop";
    const COLD: &str = "_RNvCs1_4demo10cold_start";

    #[test]
    fn executed_reads_self_cost_of_the_binary_only() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        let profile = dir.join("callgrind.out.1");
        std::fs::write(
            &profile,
            format!(
                "version: 1\npositions: line\nevents: Ir\n\
                 ob=/lib/libc.so.6\nfn=memcpy\n0 900\n\
                 ob=/opt/turnstone\nfn={COLD}\n0 5\ncfn={HOT}\ncalls=1 0\n0 1000\n\
                 fn={HOT}\n0 700\n+1 2\n* 3\n\
                 fn={COLD}'2\n0 1\n\
                 fn=0x1234\n0 3\nfn=(below main)\n0 4\n"
            ),
        )
        .unwrap();
        let keys = executed(std::slice::from_ref(&profile), "turnstone").unwrap();
        // hot_loop's self cost (705) outranks cold_start's (6, with its
        // recursive `'2` part): the call's inclusive 1000 is not cold_start's.
        assert_eq!(keys, vec![key(HOT), key(COLD)]);
        let text = std::fs::read_to_string(&profile).unwrap();
        let cost = self_costs(&text, "turnstone").unwrap();
        assert_eq!(cost.get(HOT), Some(&705));
        assert_eq!(cost.get(COLD), Some(&6));
        // Two position columns: the cost is the third.
        let two = format!("positions: instr line\nob=/opt/turnstone\nfn={HOT}\n0x10 7 40\n");
        assert_eq!(self_costs(&two, "turnstone").unwrap().get(HOT), Some(&40));
        let compressed = "ob=/opt/turnstone\nfn=(1) f\n0 1\n";
        let err = self_costs(compressed, "turnstone").unwrap_err();
        assert!(err.to_string().contains("--compress-strings=no"), "{err}");
        let legacy = "ob=/opt/turnstone\nfn=_ZN4demo3foo17h0123456789abcdefE\n0 1\n";
        let err = self_costs(legacy, "turnstone").unwrap_err();
        assert!(err.to_string().contains("v0"), "{err}");
    }

    #[test]
    fn only_the_turnstone_executable_gets_the_order_and_response_files_are_read() {
        let words = |o: &str| vec!["-m64".to_string(), "-o".into(), o.to_string()];
        let out = ordered_output(&words("/t/dist/deps/turnstone-0123abcd"));
        assert_eq!(out, Some(PathBuf::from("/t/dist/deps/turnstone-0123abcd")));
        assert_eq!(
            ordered_output(&words("/t/build/x/build_script_build-12")),
            None
        );
        assert_eq!(
            ordered_output(&words("/t/deps/libturnstone_macros-1.so")),
            None
        );
        assert_eq!(ordered_output(&words("/t/deps/turnstone-1.so")), None);
        assert_eq!(ordered_output(&["-m64".to_string()]), None);

        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        let rsp = dir.join("linker-arguments");
        std::fs::write(&rsp, "-m64\n/a\\ b/x.o\n-o\n/t/deps/turnstone-9\n").unwrap();
        let args = [OsString::from(format!("@{}", rsp.display())), "-lc".into()];
        let words = expanded(&args).unwrap();
        assert_eq!(
            words,
            ["-m64", "/a b/x.o", "-o", "/t/deps/turnstone-9", "-lc"]
        );
        assert!(ordered_output(&words).is_some());
    }

    #[test]
    fn the_ordering_file_names_listed_functions_of_the_objects_in_list_order() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        let src = dir.join("f.c");
        std::fs::write(
            &src,
            "int alpha(int x) { return x + 1; }\n\
             int beta(int x) { return x * 2; }\n\
             int gamma_(int x) { return x - 3; }\n",
        )
        .unwrap();
        let obj = dir.join("f.o");
        let status = Command::new("cc")
            .args(["-c", "-ffunction-sections", "-o"])
            .arg(&obj)
            .arg(&src)
            .status()
            .unwrap();
        assert!(status.success());
        let list = dir.join("list.txt");
        // `delta` is listed but not defined: it is left out, not an error.
        let keys = [key("gamma_"), key("delta"), key("alpha")];
        std::fs::write(&list, format!("# comment\n{}\n", keys.join("\n"))).unwrap();
        let words = vec![
            "-m64".to_string(),
            obj.display().to_string(),
            "-o".into(),
            dir.join("out").display().to_string(),
        ];
        let out = dir.join("order");
        let found = ordering_file(&list, &words, &out).unwrap();
        let want = Found {
            matched: 2,
            listed: 3,
            placed: 2,
        };
        assert_eq!(found, want);
        // Only lld takes the ordering file: another linker links unordered.
        let output = dir.join("turnstone-1");
        let err = order_flags(&list, &words, &output).unwrap_err();
        assert!(err.to_string().contains("lld"), "{err}");
        let mut lld = words.clone();
        lld.push("-fuse-ld=lld".into());
        let flags = order_flags(&list, &lld, &output).unwrap();
        let ordering = output.with_extension("symbol-order").display().to_string();
        assert!(flags.contains(&ordering), "{flags:?}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "gamma_\nalpha\n");
    }

    #[test]
    fn response_files_are_unescaped() {
        assert_eq!(unescape(r"a\ b\\c\\"), r"a b\c\");
    }
}
