//! `turnstone plugins keygen | sign | verify`: ed25519 signatures over a
//! plugin's component and manifest (`plugin.sig` beside them). Operators list
//! the public keys they trust in `[plugins] trusted_keys` and turn on
//! `[plugins] require_signatures`; see `turnstone_runtime::signing`.

use anyhow::{Context, Result, bail};
use std::io::Write;
use std::path::{Path, PathBuf};
use turnstone_runtime::Manifest;
use turnstone_runtime::signing::{self, SIGNATURE_FILE};

/// The files of the plugin in `dir`: manifest text and component bytes.
fn plugin_files(dir: &Path) -> Result<(String, Vec<u8>)> {
    let mp = dir.join("plugin.toml");
    let text =
        std::fs::read_to_string(&mp).with_context(|| format!("cannot read {}", mp.display()))?;
    let m = Manifest::parse(&text, &mp)?;
    let wp = dir.join(m.component_file());
    let wasm = std::fs::read(&wp).with_context(|| format!("cannot read {}", wp.display()))?;
    Ok((text, wasm))
}

/// Writes a new private key to `out` (mode 0600) and prints its public key.
pub fn keygen(out_path: &Path, force: bool, out: &mut impl Write) -> Result<()> {
    if out_path.exists() && !force {
        bail!("{} exists; pass --force to replace it", out_path.display());
    }
    let text = signing::generate_private_key()?;
    let key = signing::parse_private_key(&text)?;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts
        .open(out_path)
        .with_context(|| format!("cannot write {}", out_path.display()))?;
    f.write_all(text.as_bytes())?;
    let public = signing::public_key_string(&key.verifying_key());
    writeln!(out, "{public}")?;
    eprintln!(
        "private key written to {} (keep it secret); trust the public key above with\n  [plugins] trusted_keys = [\"{public}\"]",
        out_path.display()
    );
    Ok(())
}

/// Signs the plugin in `dir` with the key in `key_path`.
pub fn sign(dir: &Path, key_path: &Path, out: &mut impl Write) -> Result<()> {
    let key_text = std::fs::read_to_string(key_path)
        .with_context(|| format!("cannot read {}", key_path.display()))?;
    let key = signing::parse_private_key(&key_text)?;
    let (text, wasm) = plugin_files(dir)?;
    let file = signing::sign(&key, text.as_bytes(), &wasm);
    let sig = toml::to_string(&file)?;
    let path = dir.join(SIGNATURE_FILE);
    std::fs::write(&path, format!("# turnstone plugin signature\n{sig}"))
        .with_context(|| format!("cannot write {}", path.display()))?;
    writeln!(
        out,
        "signed {} with {} (component sha256 {})",
        dir.display(),
        file.public_key,
        &file.component_sha256[..16]
    )?;
    Ok(())
}

/// Checks the signature of the plugin in `dir` (against `trusted` when
/// given, else only that it holds); fails with the reason.
pub fn verify(dir: &Path, trusted: &[String], out: &mut impl Write) -> Result<()> {
    let (text, wasm) = plugin_files(dir)?;
    let sig = std::fs::read_to_string(dir.join(SIGNATURE_FILE)).ok();
    let keys = trusted
        .iter()
        .map(|k| signing::parse_public_key(k))
        .collect::<Result<Vec<_>, _>>()?;
    let signer = signing::verify(
        sig.as_deref(),
        text.as_bytes(),
        &wasm,
        (!keys.is_empty()).then_some(keys.as_slice()),
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    writeln!(
        out,
        "{}: valid signature by {}{}",
        dir.display(),
        signing::public_key_string(&signer),
        if keys.is_empty() {
            " (no trusted keys configured: not checked against them)"
        } else {
            " (trusted)"
        }
    )?;
    Ok(())
}

/// `plugins keygen|sign|verify` arguments.
#[derive(clap::Subcommand, Debug)]
pub enum SignAction {
    /// Make a signing key: the private key goes to --out (mode 0600), the
    /// public key (`ed25519:…`) is printed for `[plugins] trusted_keys`.
    Keygen {
        /// Where to write the private key.
        #[arg(long)]
        out: PathBuf,
        /// Replace an existing file.
        #[arg(long)]
        force: bool,
    },
    /// Sign a plugin directory: writes `plugin.sig` over its component's and
    /// manifest's sha256.
    Sign {
        /// The plugin directory (plugin.toml + component).
        path: PathBuf,
        /// The private key file (from `keygen`).
        #[arg(long)]
        key: PathBuf,
    },
    /// Check a plugin directory's signature: that it holds, and that its key
    /// is one of `[plugins] trusted_keys` (or the --trusted-key given).
    Verify {
        /// The plugin directory.
        path: PathBuf,
        /// A trusted public key (repeatable; default: `[plugins] trusted_keys`).
        #[arg(long = "trusted-key")]
        trusted_keys: Vec<String>,
    },
}
