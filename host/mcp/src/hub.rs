//! Every MCP server of a host: started in the background (never delaying
//! start-up), looked up by prefixed tool name, resource URI or prompt name,
//! enabled, disabled and reloaded at run time.

use crate::config::{ConfigError, McpConfig, ServerConfig, validate_name};
use crate::connect::ServerEnv;
use crate::grants::Origin;
use crate::server::{McpServer, ServerState};
use crate::tool::McpTool;
use rmcp::model::Prompt;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::watch;
use turnstone_runtime::Capabilities;
use turnstone_runtime::reconcile::Override;

/// The prefix of every MCP tool name.
pub const PREFIX: &str = "mcp__";

/// Splits `mcp__{server}__{name}`.
pub fn split_prefixed(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix(PREFIX)?
        .split_once("__")
        .filter(|(s, t)| !s.is_empty() && !t.is_empty())
}

/// Counts for `/health` (its `mcp` field) and `node_snapshot`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Configured servers (disabled ones included).
    pub servers: usize,
    /// Connected now.
    pub connected: usize,
    /// Tools of connected servers.
    pub tools: usize,
    /// Resources and templates.
    pub resources: usize,
    /// Prompts.
    pub prompts: usize,
}

/// What the operator wants of one server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerWish {
    /// Its definition (`disabled` set when the operator disabled it).
    pub config: ServerConfig,
    /// Where the definition came from (decides the default grant).
    pub origin: Origin,
    /// The operator's grant; `None`: the default of its origin.
    pub grant: Option<Capabilities>,
    /// Reload requests: a new value reconnects the server.
    pub reload_seq: i64,
}

/// What one [`McpHub::apply`] did to a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubChange {
    /// A server that was not there starts.
    Added(String),
    /// Its definition, grant or enabled state changed: restarted with the new one.
    Replaced(String),
    /// A reload request: reconnected.
    Reconnected(String),
    /// Gone from the configuration and the database.
    Removed(String),
}

/// Every server `name` the operator wants on this node:
/// * `config` servers (`config.toml`, `--mcp-config`; origin config) with
///   their `[plugins.grants]` entry from `config_grants`;
/// * `runtime` servers (the `mcp_servers` table; origin api), unless a
///   config server has the name (config wins, with a warning);
/// * `overrides` (the `plugins` table) laid over both: enabled, grant, reload.
///
/// A runtime definition that does not validate is skipped with a warning.
pub fn wishes(
    config: &McpConfig,
    config_grants: &BTreeMap<String, Capabilities>,
    runtime: &BTreeMap<String, ServerConfig>,
    overrides: &BTreeMap<String, Override>,
) -> BTreeMap<String, ServerWish> {
    let mut out = BTreeMap::new();
    let sources = config
        .servers
        .iter()
        .map(|(n, c)| (n, c, Origin::Config))
        .chain(runtime.iter().map(|(n, c)| (n, c, Origin::Api)));
    for (name, server, origin) in sources {
        if out.contains_key(name) {
            tracing::warn!(
                server = %name,
                "an MCP server of this name is defined in config.toml; the database definition is ignored"
            );
            continue;
        }
        if origin == Origin::Api
            && let Err(e) = validate_name(name)
                .and_then(|()| server.transport(name).map(|_| ()))
                .and_then(|()| server.validate_numbers(name))
        {
            tracing::warn!(server = %name, "stored MCP server definition skipped: {e}");
            continue;
        }
        let ov = overrides.get(name.as_str());
        let mut config = server.clone();
        if let Some(enabled) = ov.and_then(|o| o.enabled) {
            config.disabled = !enabled;
        }
        let grant = match ov.and_then(|o| o.grant.clone()) {
            Some(g) => Some(g),
            None if origin == Origin::Config => config_grants.get(name.as_str()).cloned(),
            None => None,
        };
        out.insert(
            name.clone(),
            ServerWish {
                config,
                origin,
                grant,
                reload_seq: ov.map_or(0, |o| o.reload_seq),
            },
        );
    }
    out
}

/// The servers of one host. Dropping it stops them all.
pub struct McpHub {
    servers: RwLock<BTreeMap<String, Arc<McpServer>>>,
    /// The BM25 index of every tool, rebuilt only when a catalogue changed.
    search: std::sync::Mutex<Option<(u64, Arc<SearchIndex>)>>,
    /// Servers written by the operator (`config.toml`, `--mcp-config`).
    base: McpConfig,
    /// `[plugins.grants]` of `config.toml`.
    base_grants: BTreeMap<String, Capabilities>,
    /// Serialises [`McpHub::apply`] so two passes never interleave.
    applying: std::sync::Mutex<()>,
    changed: watch::Sender<u64>,
    env: ServerEnv,
    timeout: Duration,
}

impl McpHub {
    /// A hub with no servers.
    pub fn empty(env: ServerEnv) -> Arc<Self> {
        Arc::new(Self::with(McpConfig::default(), BTreeMap::new(), env))
    }

    fn with(base: McpConfig, base_grants: BTreeMap<String, Capabilities>, env: ServerEnv) -> Self {
        Self {
            servers: RwLock::default(),
            search: Default::default(),
            timeout: base.call_timeout(),
            base,
            base_grants,
            applying: std::sync::Mutex::new(()),
            changed: watch::channel(0).0,
            env,
        }
    }

    /// A hub for the servers of `cfg`, none started yet: the first
    /// [`McpHub::apply`] starts them with the operator's stored state.
    /// `grants` are `[plugins.grants]`; a server without an entry there gets
    /// the default of its origin (see [`crate::grants`]).
    pub fn new(
        cfg: &McpConfig,
        grants: &BTreeMap<String, Capabilities>,
        env: ServerEnv,
    ) -> Result<Arc<Self>, ConfigError> {
        cfg.validate()?;
        Ok(Arc::new(Self::with(cfg.clone(), grants.clone(), env)))
    }

    /// [`McpHub::new`], then every server of `cfg` starts in the background
    /// (call inside a tokio runtime).
    pub fn start(
        cfg: &McpConfig,
        grants: &BTreeMap<String, Capabilities>,
        env: ServerEnv,
    ) -> Result<Arc<Self>, ConfigError> {
        let hub = Self::new(cfg, grants, env)?;
        hub.apply(&BTreeMap::new(), &BTreeMap::new());
        Ok(hub)
    }

    /// Brings the running servers in line with the configuration, the
    /// `runtime` definitions (the `mcp_servers` table) and the operator's
    /// `overrides` (the `plugins` table): new servers start, changed ones
    /// restart, a new reload request reconnects, and servers no longer
    /// wanted stop. Returns what changed.
    pub fn apply(
        &self,
        runtime: &BTreeMap<String, ServerConfig>,
        overrides: &BTreeMap<String, Override>,
    ) -> Vec<HubChange> {
        let _one = self.applying.lock().unwrap_or_else(|p| p.into_inner());
        let want = wishes(&self.base, &self.base_grants, runtime, overrides);
        let mut changes = Vec::new();
        for (name, wish) in &want {
            match self.server(name) {
                Some(s)
                    if s.config == wish.config
                        && s.origin == wish.origin
                        && s.explicit_grant() == wish.grant.as_ref() =>
                {
                    if s.reload_seq() != wish.reload_seq {
                        s.set_reload_seq(wish.reload_seq);
                        if s.state() != ServerState::Disabled {
                            s.reconnect();
                            changes.push(HubChange::Reconnected(name.clone()));
                        }
                    }
                }
                existing => match self.install(name, wish) {
                    Ok(()) => changes.push(if existing.is_some() {
                        HubChange::Replaced(name.clone())
                    } else {
                        HubChange::Added(name.clone())
                    }),
                    Err(e) => tracing::warn!(server = %name, "MCP server not started: {e}"),
                },
            }
        }
        for s in self.servers() {
            if !want.contains_key(&s.name) && self.remove(&s.name) {
                changes.push(HubChange::Removed(s.name.clone()));
            }
        }
        changes
    }

    /// Starts `wish` as server `name` (unless disabled), replacing one of that name.
    fn install(&self, name: &str, wish: &ServerWish) -> Result<(), ConfigError> {
        let server = Arc::new(McpServer::new(
            name,
            wish.config.clone(),
            wish.origin,
            wish.grant.as_ref(),
            &self.env,
            self.timeout,
            self.changed.clone(),
        )?);
        server.set_reload_seq(wish.reload_seq);
        if wish.config.disabled {
            server.stop();
        } else {
            tokio::spawn(server.clone().supervise());
        }
        let old = self
            .servers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_string(), server);
        if let Some(old) = old {
            old.stop();
        }
        self.changed.send_modify(|g| *g += 1);
        Ok(())
    }

    /// Removes server `name`; false when there was none.
    fn remove(&self, name: &str) -> bool {
        let old = self
            .servers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
        match old {
            Some(s) => {
                s.stop();
                self.changed.send_modify(|g| *g += 1);
                true
            }
            None => false,
        }
    }

    /// Whether `name` is defined in the configuration (not the database).
    pub fn configured(&self, name: &str) -> bool {
        self.base.servers.contains_key(name)
    }

    /// Drops the connection of `name` and connects again; false when unknown.
    pub fn reload(&self, name: &str) -> bool {
        match self.server(name) {
            Some(s) => {
                s.reconnect();
                true
            }
            None => false,
        }
    }

    /// Stops every server.
    pub fn shutdown(&self) {
        for s in self.servers() {
            s.stop();
        }
    }

    /// Every server, by name.
    pub fn servers(&self) -> Vec<Arc<McpServer>> {
        read(&self.servers).values().cloned().collect()
    }

    /// A server by name.
    pub fn server(&self, name: &str) -> Option<Arc<McpServer>> {
        read(&self.servers).get(name).cloned()
    }

    /// Tools of every connected server, in server order.
    pub fn tools(&self) -> Vec<(Arc<McpServer>, McpTool)> {
        self.servers()
            .into_iter()
            .flat_map(|s| {
                let cat = s.catalog();
                cat.tools
                    .iter()
                    .map(|t| (s.clone(), t.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// How many tools [`McpHub::tools`] lists, without copying them.
    pub fn tool_count(&self) -> usize {
        self.servers().iter().map(|s| s.catalog().tools.len()).sum()
    }

    /// The server and tool behind `mcp__{server}__{tool}`.
    pub fn tool(&self, prefixed: &str) -> Option<(Arc<McpServer>, McpTool)> {
        let (server, tool) = split_prefixed(prefixed)?;
        let s = self.server(server)?;
        let t = s.catalog().tools.iter().find(|t| t.name == tool).cloned()?;
        Some((s, t))
    }

    /// Whether some server offers resources / prompts.
    pub fn offers(&self) -> (bool, bool) {
        let mut r = false;
        let mut p = false;
        for s in self.servers() {
            let c = s.catalog();
            r |= !c.resources.is_empty() || !c.templates.is_empty();
            p |= !c.prompts.is_empty();
        }
        (r, p)
    }

    /// The server serving `uri`: the one listing it, else the one whose
    /// template matches, else the only server with resources.
    pub fn resource_owner(&self, uri: &str) -> Option<Arc<McpServer>> {
        let servers = self.servers();
        if let Some(s) = servers
            .iter()
            .find(|s| s.catalog().resources.iter().any(|r| r.uri == uri))
        {
            return Some(s.clone());
        }
        if let Some(s) = servers.iter().find(|s| {
            s.catalog()
                .templates
                .iter()
                .any(|t| template_matches(&t.uri_template, uri))
        }) {
            return Some(s.clone());
        }
        let with: Vec<_> = servers
            .into_iter()
            .filter(|s| {
                let c = s.catalog();
                !c.resources.is_empty() || !c.templates.is_empty()
            })
            .collect();
        (with.len() == 1).then(|| with[0].clone())
    }

    /// The server and prompt behind `mcp__{server}__{prompt}`.
    pub fn prompt(&self, prefixed: &str) -> Option<(Arc<McpServer>, Prompt)> {
        let (server, prompt) = split_prefixed(prefixed)?;
        let s = self.server(server)?;
        let p = s
            .catalog()
            .prompts
            .iter()
            .find(|p| p.name == prompt)
            .cloned()?;
        Some((s, p))
    }

    /// `tool_search`: the best `limit` tools for `query` as (prefixed name,
    /// description). The index is cached until a catalogue changes.
    pub fn search_tools(&self, query: &str, limit: usize) -> Vec<(String, String)> {
        let generation = self.generation();
        let cached = {
            let c = self.search.lock().unwrap_or_else(|p| p.into_inner());
            c.as_ref()
                .filter(|(g, _)| *g == generation)
                .map(|(_, i)| i.clone())
        };
        let index = match cached {
            Some(i) => i,
            None => {
                let tools: Vec<(String, String)> = self
                    .tools()
                    .into_iter()
                    .map(|(_, t)| (t.prefixed, t.description))
                    .collect();
                let index = Arc::new(SearchIndex {
                    index: crate::search::ToolIndex::new(
                        tools.iter().map(|(a, b)| (a.as_str(), b.as_str())),
                    ),
                    tools,
                });
                *self.search.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((generation, index.clone()));
                index
            }
        };
        index
            .index
            .search(query, limit)
            .into_iter()
            .filter_map(|h| index.tools.iter().find(|(n, _)| *n == h.name).cloned())
            .collect()
    }

    /// A receiver that changes whenever a catalogue or a connection changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Bumped on every change.
    pub fn generation(&self) -> u64 {
        *self.changed.borrow()
    }

    /// Counts for `/health`.
    pub fn summary(&self) -> Summary {
        let mut out = Summary::default();
        for s in self.servers() {
            out.servers += 1;
            if s.state() == ServerState::Connected {
                out.connected += 1;
            }
            let c = s.catalog();
            out.tools += c.tools.len();
            out.resources += c.resources.len() + c.templates.len();
            out.prompts += c.prompts.len();
        }
        out
    }

    /// Waits until server `name` is connected (tests, `turnstone tool`), or
    /// gives up after `within`; returns its state then.
    pub async fn wait_connected(&self, name: &str, within: Duration) -> Option<ServerState> {
        let mut rx = self.subscribe();
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let state = self.server(name)?.state();
            if state == ServerState::Connected {
                return Some(state);
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                return Some(state);
            }
        }
    }
}

impl Drop for McpHub {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A cached search index with the tools it was built from.
struct SearchIndex {
    index: crate::search::ToolIndex,
    tools: Vec<(String, String)>,
}

/// One piece of a URI template.
enum Piece<'a> {
    Literal(&'a str),
    /// A variable; `reserved` (`{+x}`) may span `/`.
    Var {
        reserved: bool,
    },
}

/// RFC 6570 level-1 matching: `{var}` stands for one or more characters
/// other than `/`; `{+var}` for anything. Memoised over (piece, position), so
/// a server's template cannot make it exponential.
pub fn template_matches(template: &str, uri: &str) -> bool {
    let mut pieces = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            return false;
        };
        if open > 0 {
            pieces.push(Piece::Literal(&rest[..open]));
        }
        pieces.push(Piece::Var {
            reserved: rest[open + 1..close].starts_with('+'),
        });
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Literal(rest));
    }
    let bytes = uri.as_bytes();
    // reach[i][p]: pieces[i..] can match uri[p..]; filled from the end.
    let n = uri.len();
    let mut next = vec![false; n + 1];
    next[n] = true;
    for piece in pieces.iter().rev() {
        let mut cur = vec![false; n + 1];
        match piece {
            Piece::Literal(l) => {
                for p in 0..=n {
                    cur[p] = bytes[p..].starts_with(l.as_bytes()) && next[p + l.len()];
                }
            }
            Piece::Var { reserved } => {
                // cur[p]: some q > p has next[q] and uri[p..q] holds no
                // '/' (unless reserved); `any` carries that set downwards.
                let mut any = false;
                for p in (0..n).rev() {
                    if !*reserved && bytes[p] == b'/' {
                        any = false;
                        continue;
                    }
                    any |= next[p + 1];
                    cur[p] = any && uri.is_char_boundary(p);
                }
            }
        }
        next = cur;
    }
    next[0]
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixed_names_split_at_the_first_delimiter_after_the_server() {
        assert_eq!(split_prefixed("mcp__gh__search"), Some(("gh", "search")));
        assert_eq!(split_prefixed("mcp__gh__a__b"), Some(("gh", "a__b")));
        assert_eq!(split_prefixed("mcp__gh"), None);
        assert_eq!(split_prefixed("bash"), None);
        assert_eq!(split_prefixed("mcp____x"), None);
    }

    #[test]
    fn templates_match_level_one_uris() {
        let t = "demo://resource/dynamic/text/{index}";
        assert!(template_matches(t, "demo://resource/dynamic/text/7"));
        assert!(!template_matches(t, "demo://resource/dynamic/text/"));
        assert!(!template_matches(t, "demo://resource/dynamic/text/7/x"));
        assert!(!template_matches(t, "demo://resource/dynamic/blob/7"));
        assert!(template_matches(
            "db://{table}/rows/{id}",
            "db://users/rows/3"
        ));
        assert!(template_matches("file://{+path}", "file://a/b/c"));
        assert!(!template_matches("x/{a}", "x/"));
        assert!(template_matches("{a}-{b}", "p-q"));
        // Many reserved variables against a long miss stay fast.
        let t = "{+a}{+b}{+c}{+d}{+e}{+f}{+g}{+h}z";
        let u = "y".repeat(4000);
        assert!(!template_matches(t, &u));
    }
}
