//! A test kit for plugin authors. Your component is loaded by the same
//! runtime the host uses — the real sandbox, the real capability checks — with
//! exactly the grants, configuration and secrets your test gives it, against a
//! scratch workspace:
//!
//! ```no_run
//! # async fn t() -> Result<(), turnstone_plugin_test::KitError> {
//! use turnstone_plugin_test::TestPlugin;
//! let plugin = TestPlugin::from_dir("target/example-plugins/word_count")
//!     .grant(r#"filesystem = [{ path = "workspace", access = "read-only" }]"#)?
//!     .file("notes.txt", "one two three")
//!     .load()
//!     .await?;
//! let out = plugin.call("word_count", serde_json::json!({"path": "notes.txt"})).await?;
//! assert!(out.ok().contains("words: 3"));
//! # Ok(()) }
//! ```
//!
//! [`TestPlugin::build`] compiles a guest crate for `wasm32-wasip2` first, so
//! a test always runs the code next to it.

mod build;

pub use build::{build_component, build_component_in};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use turnstone_runtime::{
    CallContext, Capabilities, Limits, LoadedPlugin, PluginSettings, PluginSource, Runtime,
    RuntimeOptions, SecretSource, SessionHost, ToolOutputSink, ToolSpec,
};

/// Why the kit could not do what a test asked.
#[derive(Debug, thiserror::Error)]
pub enum KitError {
    /// The grant TOML does not parse as `[plugins.grants.NAME]` would.
    #[error("grant: {0}")]
    Grant(String),
    /// Building the guest crate failed.
    #[error("build: {0}")]
    Build(String),
    /// The component did not load (bad manifest, unknown WIT, …).
    #[error("load: {0}")]
    Load(#[from] turnstone_runtime::LoadError),
    /// The runtime could not start.
    #[error("runtime: {0}")]
    Runtime(#[from] turnstone_runtime::RuntimeError),
    /// The call trapped, ran out of time or memory, or named no such tool.
    #[error("call: {0}")]
    Call(#[from] turnstone_runtime::CallError),
    /// The scratch workspace could not be prepared.
    #[error("workspace: {0}")]
    Io(#[from] std::io::Error),
}

/// What to load, and with what; see [`TestPlugin::from_dir`].
pub struct Builder {
    dir: PathBuf,
    grant: Option<Capabilities>,
    config: BTreeMap<String, String>,
    secrets: BTreeMap<String, String>,
    files: Vec<(PathBuf, Vec<u8>)>,
    limits: Limits,
    session: Option<Arc<dyn SessionHost>>,
    builtin: bool,
}

impl Builder {
    /// Grants capabilities as the operator would under
    /// `[plugins.grants.NAME]` (TOML, e.g. `http = ["api.example.com"]`).
    /// Without a call the plugin gets nothing, as a third-party plugin does.
    pub fn grant(mut self, toml_text: &str) -> Result<Self, KitError> {
        let caps: Capabilities =
            toml::from_str(toml_text).map_err(|e| KitError::Grant(e.to_string()))?;
        self.grant = Some(caps);
        Ok(self)
    }

    /// Loads it as a built-in: it gets what its manifest requests unless
    /// [`Builder::grant`] says otherwise.
    pub fn as_builtin(mut self) -> Self {
        self.builtin = true;
        self
    }

    /// A value the plugin reads with `host::config(key)`.
    pub fn config(mut self, key: &str, value: &str) -> Self {
        self.config.insert(key.into(), value.into());
        self
    }

    /// A secret the host substitutes for the plugin's reference token.
    pub fn secret(mut self, name: &str, value: &str) -> Self {
        self.secrets.insert(name.into(), value.into());
        self
    }

    /// A file in the scratch workspace (`path` relative to it).
    pub fn file(mut self, path: impl Into<PathBuf>, contents: impl Into<Vec<u8>>) -> Self {
        self.files.push((path.into(), contents.into()));
        self
    }

    /// Per-call limits (memory, deadline).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The session the agent interfaces (memory, history, skills, session
    /// info) reach; without one they answer "no session".
    pub fn session(mut self, session: Arc<dyn SessionHost>) -> Self {
        self.session = Some(session);
        self
    }

    /// Loads the component in a fresh runtime.
    pub async fn load(self) -> Result<TestPlugin, KitError> {
        let workspace = tempfile::tempdir()?;
        let root = std::fs::canonicalize(workspace.path())?;
        for (path, contents) in &self.files {
            // Inside the scratch workspace only.
            if path.is_absolute()
                || path
                    .components()
                    .any(|c| !matches!(c, std::path::Component::Normal(_)))
            {
                return Err(KitError::Io(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "{} is not a relative path inside the workspace",
                        path.display()
                    ),
                )));
            }
            let dest = root.join(path);
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(dest, contents)?;
        }
        let runtime = Runtime::new(RuntimeOptions::default())?;
        let plugin = runtime
            .load(
                PluginSource {
                    dir: self.dir.clone(),
                    builtin: self.builtin,
                },
                PluginSettings {
                    grant: self.grant,
                    config: self.config,
                    limits: self.limits,
                    workspace: Some(root.clone()),
                    secrets: Arc::new(Secrets(self.secrets)),
                    ..Default::default()
                },
            )
            .await?;
        Ok(TestPlugin {
            _runtime: runtime,
            plugin,
            root,
            _workspace: workspace,
            session: self.session,
        })
    }
}

struct Secrets(BTreeMap<String, String>);

impl SecretSource for Secrets {
    fn secret(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
}

/// A loaded plugin under test, with its scratch workspace.
pub struct TestPlugin {
    _runtime: Runtime,
    plugin: LoadedPlugin,
    root: PathBuf,
    _workspace: tempfile::TempDir,
    session: Option<Arc<dyn SessionHost>>,
}

impl TestPlugin {
    /// A staged plugin directory (`plugin.toml` + the `.wasm` it names).
    pub fn from_dir(dir: impl Into<PathBuf>) -> Builder {
        Builder {
            dir: dir.into(),
            grant: None,
            config: BTreeMap::new(),
            secrets: BTreeMap::new(),
            files: Vec::new(),
            limits: Limits::default(),
            session: None,
            builtin: false,
        }
    }

    /// Builds the guest crate at `crate_dir` for `wasm32-wasip2` (release)
    /// and stages it with its `plugin.toml`; see [`build_component`].
    pub fn build(crate_dir: impl AsRef<Path>) -> Result<Builder, KitError> {
        Ok(Self::from_dir(build_component(crate_dir.as_ref())?))
    }

    /// [`TestPlugin::build`] into a shared target directory.
    pub fn build_in(
        crate_dir: impl AsRef<Path>,
        target_dir: impl AsRef<Path>,
    ) -> Result<Builder, KitError> {
        Ok(Self::from_dir(build_component_in(
            crate_dir.as_ref(),
            Some(target_dir.as_ref()),
        )?))
    }

    /// The tools it describes.
    pub fn tools(&self) -> &[ToolSpec] {
        &self.plugin.tools
    }

    /// The scratch workspace the plugin's `workspace` grants point at.
    pub fn workspace(&self) -> &Path {
        &self.root
    }

    /// The loaded plugin, for what the kit does not wrap.
    pub fn plugin(&self) -> &LoadedPlugin {
        &self.plugin
    }

    fn context(&self) -> CallContext {
        let dir = self.root.display().to_string();
        CallContext {
            call_id: "call_test".into(),
            session_id: "ws_test".into(),
            workspace_dir: Some(dir.clone()),
            working_dir: dir,
            supports_vision: false,
        }
    }

    /// The approval step: the preview, or the tool's refusal of the
    /// arguments as `Err(message)`.
    pub async fn prepare(
        &self,
        tool: &str,
        args: serde_json::Value,
    ) -> Result<Result<Preview, String>, KitError> {
        let raw = self.arguments(tool, &args)?;
        Ok(self
            .plugin
            .prepare(tool, &raw, &self.context())
            .await?
            .map(|p| Preview {
                header: p.header,
                body: p.body,
                needs_approval: p.needs_approval,
            }))
    }

    /// Runs a call as the host does after approval: `prepare` first (its
    /// refusal comes back as an error outcome), then `execute`.
    pub async fn call(&self, tool: &str, args: serde_json::Value) -> Result<Outcome, KitError> {
        if let Err(refusal) = self.prepare(tool, args.clone()).await? {
            return Ok(Outcome {
                output: refusal,
                is_error: true,
                chunks: Vec::new(),
                images: 0,
            });
        }
        let raw = self.arguments(tool, &args)?;
        let sink = Arc::new(Recorder {
            chunks: Mutex::default(),
            session: self.session.clone(),
        });
        let r = self
            .plugin
            .execute(tool, &raw, &self.context(), sink.clone(), None)
            .await?;
        let chunks = std::mem::take(&mut *sink.chunks.lock().unwrap_or_else(|p| p.into_inner()));
        Ok(Outcome {
            output: r.output,
            is_error: r.is_error,
            chunks,
            images: r.images.len(),
        })
    }

    /// Arguments as the host passes them: coerced to the tool's schema, a
    /// bare string mapped to its primary key.
    fn arguments(&self, tool: &str, args: &serde_json::Value) -> Result<String, KitError> {
        let raw = match args {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match self.plugin.tool(tool) {
            Some(spec) => Ok(spec.coerce_arguments(&raw).unwrap_or(raw)),
            None => Ok(raw),
        }
    }
}

/// The approval preview of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    /// One line.
    pub header: String,
    /// Longer body (a diff, a command).
    pub body: Option<String>,
    /// False when the call runs without asking.
    pub needs_approval: bool,
}

/// What a call produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The text the model would see.
    pub output: String,
    /// Whether the tool reported an error (a denial is one).
    pub is_error: bool,
    /// Output streamed while it ran, in order.
    pub chunks: Vec<String>,
    /// Images it returned for vision models.
    pub images: usize,
}

impl Outcome {
    /// The output of a successful call; panics with the error otherwise.
    #[track_caller]
    pub fn ok(&self) -> &str {
        assert!(!self.is_error, "the call failed: {}", self.output);
        &self.output
    }

    /// The message of a failed call; panics with the output otherwise.
    #[track_caller]
    pub fn err(&self) -> &str {
        assert!(self.is_error, "the call succeeded: {}", self.output);
        &self.output
    }

    /// Whether it failed on a capability denial (the message names the
    /// grant that would allow it).
    pub fn is_denied(&self) -> bool {
        self.is_error && self.output.contains(" denied") && self.output.contains("[plugins.grants.")
    }
}

struct Recorder {
    chunks: Mutex<Vec<String>>,
    session: Option<Arc<dyn SessionHost>>,
}

impl ToolOutputSink for Recorder {
    fn chunk(&self, text: &str) -> bool {
        self.chunks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(text.to_string());
        true
    }

    fn session(&self) -> Option<Arc<dyn SessionHost>> {
        self.session.clone()
    }
}
