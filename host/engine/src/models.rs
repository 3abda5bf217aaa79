//! The model registry: `[models.<alias>]` and `[model]` from config.toml, the
//! `default` alias built from CLI flags, per-alias admission (at most
//! `max_concurrency` generations at once, FIFO), and the grants each provider
//! component needs for the hosts the operator configured.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::Semaphore;
use turnstone_runtime::{Capabilities, SecretGrant};

/// `[models.<alias>]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// openai | openai-compatible | anthropic | anthropic-compatible | google.
    #[serde(default = "default_provider")]
    pub provider: String,
    /// API base URL (required for the *-compatible flavours).
    pub base_url: Option<String>,
    /// API key, or `${ENV_VAR}`.
    pub api_key: Option<String>,
    /// Model id.
    pub model: String,
    /// Context window in tokens.
    pub context_window: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Output cap.
    pub max_tokens: Option<u32>,
    /// Reasoning effort.
    pub reasoning_effort: Option<String>,
    /// Simultaneous generations (0 or absent = unlimited).
    pub max_concurrency: Option<u32>,
    /// Capability overrides.
    pub capabilities: Option<serde_json::Map<String, serde_json::Value>>,
}

fn default_provider() -> String {
    "openai".into()
}

/// `[model]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// Default alias.
    pub default: Option<String>,
    /// Aliases to try, in order, when the default is unreachable.
    #[serde(default)]
    pub fallback: Vec<String>,
    /// Alias for sub-agents.
    pub agent_model: Option<String>,
}

/// What config.toml says about models.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ModelsConfig {
    /// `[models.*]`.
    #[serde(default)]
    pub models: BTreeMap<String, ModelConfig>,
    /// `[model]`.
    #[serde(default)]
    pub model: ModelSection,
}

/// CLI flags that define the `default` alias.
#[derive(Debug, Clone, Default)]
pub struct CliModel {
    /// `--base-url`.
    pub base_url: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--api-key` (or `$OPENAI_API_KEY`).
    pub api_key: Option<String>,
    /// `--provider`.
    pub provider: Option<String>,
    /// `--context-window`: overrides the default alias's window.
    pub context_window: Option<u32>,
}

/// Registry errors.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ModelError {
    /// Unknown provider flavour.
    #[error(
        "models.{alias}: unknown provider {provider:?} (expected openai, openai-compatible, anthropic, anthropic-compatible or google)"
    )]
    UnknownProvider {
        /// Alias.
        alias: String,
        /// Given provider.
        provider: String,
    },
    /// A compatible flavour without a base URL.
    #[error("models.{0}: base_url is required for a *-compatible provider")]
    MissingBaseUrl(String),
    /// A base URL that does not parse.
    #[error("models.{alias}: base_url {url:?} is not an http(s) URL")]
    BadBaseUrl {
        /// Alias.
        alias: String,
        /// Given URL.
        url: String,
    },
    /// `${VAR}` not set.
    #[error("models.{alias}: api_key refers to ${{{var}}}, which is not set")]
    MissingEnv {
        /// Alias.
        alias: String,
        /// Variable.
        var: String,
    },
    /// An alias named in `[model]` that does not exist.
    #[error("[model] {field} names alias {alias:?}, which is not defined")]
    UnknownAlias {
        /// Which field.
        field: &'static str,
        /// The alias.
        alias: String,
    },
    /// No model at all.
    #[error("no model is configured: add [models.<alias>] to config.toml or pass --model")]
    NoModels,
    /// The provider component an alias needs is not loaded.
    #[error("models.{alias}: the {component} provider component is not loaded")]
    NoProvider {
        /// Alias.
        alias: String,
        /// Component name.
        component: String,
    },
}

/// The registry as sessions see it: swapped atomically on reload. Sessions
/// resolve their binding at the start of each turn, so a turn in flight
/// finishes on the binding it started with.
pub struct LiveModels {
    current: std::sync::RwLock<Arc<ModelRegistry>>,
    providers: Providers,
}

/// Where provider components come from.
enum Providers {
    /// A fixed set.
    Fixed(BTreeMap<String, Arc<turnstone_runtime::LoadedPlugin>>),
    /// The live plugin set: a reloaded provider serves from the next turn on.
    Live(Arc<turnstone_runtime::LivePlugins>),
}

impl Providers {
    fn get(&self, component: &str) -> Option<Arc<turnstone_runtime::LoadedPlugin>> {
        match self {
            Providers::Fixed(m) => m.get(component).cloned(),
            Providers::Live(live) => live.snapshot().plugin(component).cloned(),
        }
    }
}

impl LiveModels {
    /// A live registry over loaded provider components (by component name).
    pub fn new(
        registry: ModelRegistry,
        providers: BTreeMap<String, Arc<turnstone_runtime::LoadedPlugin>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            current: std::sync::RwLock::new(Arc::new(registry)),
            providers: Providers::Fixed(providers),
        })
    }

    /// A live registry whose provider components come from a live plugin set.
    pub fn over_live_plugins(
        registry: ModelRegistry,
        plugins: Arc<turnstone_runtime::LivePlugins>,
    ) -> Arc<Self> {
        Arc::new(Self {
            current: std::sync::RwLock::new(Arc::new(registry)),
            providers: Providers::Live(plugins),
        })
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<ModelRegistry> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces the registry; later turns use it.
    pub fn reload(&self, registry: ModelRegistry) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(registry);
    }

    /// Bindings for `alias` (default when `None`) and the configured fallbacks.
    pub fn bindings(
        &self,
        alias: Option<&str>,
    ) -> Result<
        (
            crate::session::ModelBinding,
            Vec<crate::session::ModelBinding>,
        ),
        ModelError,
    > {
        let reg = self.snapshot();
        let bind = |name: &str| -> Result<crate::session::ModelBinding, ModelError> {
            let a = reg.alias(name).ok_or_else(|| ModelError::UnknownAlias {
                field: "session",
                alias: name.to_string(),
            })?;
            let plugin =
                self.providers
                    .get(a.component())
                    .ok_or_else(|| ModelError::NoProvider {
                        alias: name.to_string(),
                        component: a.component().to_string(),
                    })?;
            Ok(crate::session::ModelBinding::from_alias(a, plugin))
        };
        let primary_name = alias.unwrap_or(&reg.default).to_string();
        let primary = bind(&primary_name)?;
        let fallbacks = reg
            .fallback
            .iter()
            .filter(|f| **f != primary_name)
            .map(|f| bind(f))
            .collect::<Result<_, _>>()?;
        Ok((primary, fallbacks))
    }
}

/// One resolved alias.
#[derive(Debug)]
pub struct Alias {
    /// Name.
    pub name: String,
    /// Provider flavour.
    pub provider: String,
    /// Base URL (defaulted per provider).
    pub base_url: String,
    /// Resolved key (never sent to a component; the host injects it).
    pub api_key: Option<String>,
    /// The config it came from.
    pub config: ModelConfig,
    /// FIFO admission gate (`None` = unlimited).
    pub admission: Option<Arc<Semaphore>>,
    /// What the provider component reports for the model, asked once.
    pub reported: crate::session::ReportedCapabilities,
    /// What the serving endpoint says about the model's window, asked once.
    pub served: crate::session::ServedWindow,
}

impl Alias {
    /// `host` or `host:port` of the base URL, as a grant entry.
    pub fn host_grant(&self) -> Option<String> {
        let rest = self
            .base_url
            .split_once("://")
            .map(|(_, r)| r)
            .unwrap_or(&self.base_url);
        let authority = rest.split(['/', '?']).next().unwrap_or("");
        let authority = authority.rsplit('@').next().unwrap_or(authority);
        (!authority.is_empty()).then(|| authority.to_ascii_lowercase())
    }

    /// The provider component serving this alias.
    pub fn component(&self) -> &'static str {
        if self.provider.starts_with("anthropic") {
            "anthropic"
        } else {
            "openai"
        }
    }
}

/// An immutable snapshot of the registry; a reload builds a new one.
#[derive(Debug)]
pub struct ModelRegistry {
    aliases: BTreeMap<String, Arc<Alias>>,
    /// Default alias.
    pub default: String,
    /// Fallback aliases.
    pub fallback: Vec<String>,
    /// Sub-agent alias.
    pub agent_model: Option<String>,
}

const PROVIDERS: &[&str] = &[
    "openai",
    "openai-compatible",
    "anthropic",
    "anthropic-compatible",
    "google",
];

fn expand_env(
    alias: &str,
    raw: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ModelError> {
    match raw.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
        Some(var) => env(var).ok_or_else(|| ModelError::MissingEnv {
            alias: alias.into(),
            var: var.into(),
        }),
        None => Ok(raw.to_string()),
    }
}

impl ModelRegistry {
    /// Builds the registry from config and CLI flags (the flags define or
    /// override the `default` alias). `env` reads environment variables.
    pub fn build(
        cfg: &ModelsConfig,
        cli: &CliModel,
        env: &dyn Fn(&str) -> Option<String>,
        previous: Option<&ModelRegistry>,
    ) -> Result<Self, ModelError> {
        let mut models = cfg.models.clone();
        if let Some(model) = &cli.model {
            models.insert(
                "default".into(),
                ModelConfig {
                    provider: cli.provider.clone().unwrap_or_else(default_provider),
                    base_url: cli.base_url.clone(),
                    api_key: cli.api_key.clone().or_else(|| env("OPENAI_API_KEY")),
                    model: model.clone(),
                    context_window: None,
                    temperature: None,
                    max_tokens: None,
                    reasoning_effort: None,
                    max_concurrency: None,
                    capabilities: None,
                },
            );
        }
        if models.is_empty() {
            return Err(ModelError::NoModels);
        }
        let mut aliases = BTreeMap::new();
        for (name, c) in models {
            if !PROVIDERS.contains(&c.provider.as_str()) {
                return Err(ModelError::UnknownProvider {
                    alias: name,
                    provider: c.provider,
                });
            }
            let base_url = match (&c.base_url, c.provider.as_str()) {
                (Some(u), _) => u.trim_end_matches('/').to_string(),
                (None, "openai") => "https://api.openai.com/v1".into(),
                (None, "anthropic") => "https://api.anthropic.com".into(),
                (None, "google") => {
                    "https://generativelanguage.googleapis.com/v1beta/openai".into()
                }
                (None, _) => return Err(ModelError::MissingBaseUrl(name)),
            };
            if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
                return Err(ModelError::BadBaseUrl {
                    alias: name,
                    url: base_url,
                });
            }
            let api_key = c
                .api_key
                .as_deref()
                .map(|k| expand_env(&name, k, env))
                .transpose()?;
            // The gate survives a reload that keeps the alias and its cap, so
            // queued generations keep their place.
            let cap = c.max_concurrency.filter(|&n| n > 0);
            let admission = match previous.and_then(|p| p.aliases.get(&name)) {
                Some(old) if old.config.max_concurrency.filter(|&n| n > 0) == cap => {
                    old.admission.clone()
                }
                _ => cap.map(|n| Arc::new(Semaphore::new(n as usize))),
            };
            aliases.insert(
                name.clone(),
                Arc::new(Alias {
                    name,
                    provider: c.provider.clone(),
                    base_url,
                    api_key,
                    config: c,
                    admission,
                    reported: Default::default(),
                    served: Default::default(),
                }),
            );
        }
        let default = cfg
            .model
            .default
            .clone()
            .filter(|_| cli.model.is_none())
            .or_else(|| {
                aliases
                    .contains_key("default")
                    .then(|| "default".to_string())
            })
            .or_else(|| aliases.keys().next().cloned())
            .ok_or(ModelError::NoModels)?;
        let check = |field: &'static str, alias: &String| {
            if aliases.contains_key(alias) {
                Ok(())
            } else {
                Err(ModelError::UnknownAlias {
                    field,
                    alias: alias.clone(),
                })
            }
        };
        check("default", &default)?;
        for f in &cfg.model.fallback {
            check("fallback", f)?;
        }
        if let Some(a) = &cfg.model.agent_model {
            check("agent_model", a)?;
        }
        if let Some(window) = cli.context_window
            && let Some(alias) = aliases.get_mut(&default).and_then(Arc::get_mut)
        {
            alias.config.context_window = Some(window);
        }
        Ok(Self {
            aliases,
            default,
            fallback: cfg.model.fallback.clone(),
            agent_model: cfg.model.agent_model.clone(),
        })
    }

    /// An alias by name.
    pub fn alias(&self, name: &str) -> Option<&Arc<Alias>> {
        self.aliases.get(name)
    }

    /// All aliases.
    pub fn aliases(&self) -> impl Iterator<Item = &Arc<Alias>> {
        self.aliases.values()
    }

    /// The grant each provider component needs: the hosts of every alias it
    /// serves, and the `api_key` secret reference.
    pub fn provider_grants(&self) -> BTreeMap<&'static str, Capabilities> {
        let mut out: BTreeMap<&'static str, Capabilities> = BTreeMap::new();
        for a in self.aliases.values() {
            let g = out.entry(a.component()).or_default();
            if let Some(h) = a.host_grant()
                && !g.http.contains(&h)
            {
                g.http.push(h);
            }
            if g.secrets.is_empty() {
                g.secrets.push(SecretGrant::named("api_key"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> ModelsConfig {
        toml::from_str(text).unwrap()
    }

    fn env(k: &str) -> Option<String> {
        (k == "ANTHROPIC_KEY").then(|| "sk-ant".to_string())
    }

    const SAMPLE: &str = r#"
[models.local]
base_url = "http://localhost:8000/v1/"
model = "qwen3-32b"
max_concurrency = 1

[models.claude]
provider = "anthropic"
api_key = "${ANTHROPIC_KEY}"
model = "claude-opus-4-8"
context_window = 200000

[models.gemini]
provider = "google"
model = "gemini-2.5-pro"

[model]
default = "local"
fallback = ["claude", "gemini"]
agent_model = "claude"
"#;

    #[test]
    fn builds_aliases_with_defaults_env_keys_and_grants() {
        let r = ModelRegistry::build(&cfg(SAMPLE), &CliModel::default(), &env, None).unwrap();
        assert_eq!(r.default, "local");
        assert_eq!(r.fallback, ["claude", "gemini"]);
        let local = r.alias("local").unwrap();
        assert_eq!(local.base_url, "http://localhost:8000/v1");
        assert_eq!(local.host_grant().as_deref(), Some("localhost:8000"));
        assert!(local.admission.is_some());
        let claude = r.alias("claude").unwrap();
        assert_eq!(claude.api_key.as_deref(), Some("sk-ant"));
        assert_eq!(claude.base_url, "https://api.anthropic.com");
        assert_eq!(claude.component(), "anthropic");
        assert!(claude.admission.is_none());
        let grants = r.provider_grants();
        assert_eq!(
            grants["openai"].http,
            ["generativelanguage.googleapis.com", "localhost:8000"]
        );
        assert_eq!(grants["anthropic"].http, ["api.anthropic.com"]);
        assert_eq!(grants["anthropic"].secrets, [SecretGrant::named("api_key")]);
    }

    #[test]
    fn cli_flags_define_the_default_alias() {
        let cli = CliModel {
            base_url: Some("http://127.0.0.1:9000/v1".into()),
            model: Some("llama".into()),
            api_key: None,
            provider: Some("openai-compatible".into()),
            context_window: Some(32_000),
        };
        let r = ModelRegistry::build(&cfg(SAMPLE), &cli, &env, None).unwrap();
        assert_eq!(r.default, "default");
        assert_eq!(r.alias("default").unwrap().config.model, "llama");
        assert_eq!(
            r.alias("default").unwrap().config.context_window,
            Some(32_000)
        );
        assert_eq!(r.alias("local").unwrap().config.context_window, None);
        assert!(ModelRegistry::build(&ModelsConfig::default(), &cli, &env, None).is_ok());
    }

    #[test]
    fn bad_configs_are_refused_with_reasons() {
        let cases = [
            (
                "[models.a]\nprovider = \"cohere\"\nmodel = \"x\"",
                "unknown provider",
            ),
            (
                "[models.a]\nprovider = \"openai-compatible\"\nmodel = \"x\"",
                "base_url is required",
            ),
            (
                "[models.a]\nbase_url = \"ftp://x\"\nmodel = \"x\"",
                "not an http(s) URL",
            ),
            (
                "[models.a]\nmodel = \"x\"\napi_key = \"${NOPE}\"",
                "${NOPE}",
            ),
            (
                "[models.a]\nmodel = \"x\"\n[model]\nfallback = [\"b\"]",
                "names alias \"b\"",
            ),
        ];
        for (text, needle) in cases {
            let err =
                ModelRegistry::build(&cfg(text), &CliModel::default(), &env, None).unwrap_err();
            assert!(
                err.to_string().contains(needle),
                "{err} should mention {needle}"
            );
        }
        assert_eq!(
            ModelRegistry::build(&ModelsConfig::default(), &CliModel::default(), &env, None)
                .unwrap_err(),
            ModelError::NoModels
        );
    }

    #[test]
    fn a_reload_keeps_the_admission_gate_when_the_cap_is_unchanged() {
        let first = ModelRegistry::build(&cfg(SAMPLE), &CliModel::default(), &env, None).unwrap();
        let same =
            ModelRegistry::build(&cfg(SAMPLE), &CliModel::default(), &env, Some(&first)).unwrap();
        let a = first.alias("local").unwrap().admission.clone().unwrap();
        let b = same.alias("local").unwrap().admission.clone().unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let changed = ModelRegistry::build(
            &cfg(&SAMPLE.replace("max_concurrency = 1", "max_concurrency = 2")),
            &CliModel::default(),
            &env,
            Some(&first),
        )
        .unwrap();
        let c = changed.alias("local").unwrap().admission.clone().unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(c.available_permits(), 2);
    }
}
