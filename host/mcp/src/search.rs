//! `tool_search`: BM25 (k1 = 1.5, b = 0.75) over tool names and descriptions,
//! for deferred tools the model finds on demand.
//!
//! Scoring and English tokenising (stemming, stop words, Unicode
//! normalisation) come from the `bm25` crate; names are split here first
//! (`mcp__github__search_repos` → `mcp github search repos`, `getWeather` →
//! `get weather`) so that a query word matches a part of a name.

use bm25::{Document, Language, SearchEngine, SearchEngineBuilder};
use serde::{Deserialize, Serialize};

/// BM25 term-frequency saturation.
pub const K1: f32 = 1.5;
/// BM25 length normalisation.
pub const B: f32 = 0.75;

/// `[tools] search`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// On when the session has more tools than the threshold.
    #[default]
    Auto,
    /// Always on (when anything can be deferred).
    On,
    /// Every tool is sent to the model.
    Off,
}

impl std::str::FromStr for SearchMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "on" => Ok(Self::On),
            "off" => Ok(Self::Off),
            other => Err(format!("tool search is auto, on or off, not {other:?}")),
        }
    }
}

/// Tool search settings of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchSettings {
    /// Mode.
    pub mode: SearchMode,
    /// `auto` switches on above this many tools.
    pub threshold: usize,
    /// Results per search.
    pub max_results: usize,
}

impl Default for SearchSettings {
    fn default() -> Self {
        Self {
            mode: SearchMode::Auto,
            threshold: 20,
            max_results: 5,
        }
    }
}

impl SearchSettings {
    /// Whether tool search is active for `total` tools of which `deferrable`
    /// could be deferred.
    pub fn active(&self, total: usize, deferrable: usize) -> bool {
        deferrable > 0
            && match self.mode {
                SearchMode::Off => false,
                SearchMode::On => true,
                SearchMode::Auto => total > self.threshold,
            }
    }
}

/// An index over a fixed set of tools.
pub struct ToolIndex {
    engine: SearchEngine<usize>,
    names: Vec<String>,
}

/// One hit.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// Tool name.
    pub name: String,
    /// BM25 score.
    pub score: f32,
}

impl ToolIndex {
    /// Indexes `(name, description)` pairs.
    pub fn new<'a>(tools: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut names = Vec::new();
        let mut docs = Vec::new();
        for (i, (name, description)) in tools.into_iter().enumerate() {
            names.push(name.to_string());
            docs.push(Document::new(
                i,
                format!("{} {description}", split_name(name)),
            ));
        }
        let engine = SearchEngineBuilder::<usize>::with_documents(Language::English, docs)
            .k1(K1)
            .b(B)
            .build();
        Self { engine, names }
    }

    /// The best `limit` tools for `query`, best first; names split like
    /// the indexed ones so `search_repos` finds `mcp__github__search_repos`.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        self.engine
            .search(&split_name(query), limit)
            .into_iter()
            .filter(|r| r.score > 0.0)
            .filter_map(|r| {
                self.names.get(r.document.id).map(|n| Hit {
                    name: n.clone(),
                    score: r.score,
                })
            })
            .collect()
    }

    /// Indexed tools.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// `mcp__github__searchRepos-v2` → `mcp github search repos v2`.
fn split_name(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut prev_lower = false;
    for c in s.chars() {
        if c == '_' || c == '-' || c == '.' || c == '/' || c == ':' {
            out.push(' ');
            prev_lower = false;
        } else {
            if c.is_uppercase() && prev_lower {
                out.push(' ');
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            out.push(c);
        }
    }
    out
}

/// The JSON schema of the synthetic `tool_search` tool.
pub fn tool_search_parameters() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "Words describing the capability you need, e.g. \"create github issue\" or a tool name."
            }
        },
        "required": ["query"]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> ToolIndex {
        ToolIndex::new([
            (
                "mcp__github__search_repos",
                "Search GitHub repositories by keyword",
            ),
            (
                "mcp__github__create_issue",
                "Create a new issue in a GitHub repository",
            ),
            (
                "mcp__pg__query",
                "Run a read-only SQL query against the database",
            ),
            ("mcp__weather__getForecast", "Weather forecast for a city"),
        ])
    }

    #[test]
    fn the_best_match_comes_first_and_names_count() {
        let idx = index();
        let hits = idx.search("open an issue on github", 5);
        assert_eq!(hits[0].name, "mcp__github__create_issue");
        let hits = idx.search("sql database", 5);
        assert_eq!(hits[0].name, "mcp__pg__query");
        assert_eq!(hits.len(), 1, "no unrelated tool scores: {hits:?}");
        let hits = idx.search("forecast", 5);
        assert_eq!(hits[0].name, "mcp__weather__getForecast");
        let hits = idx.search("search_repos", 5);
        assert_eq!(hits[0].name, "mcp__github__search_repos");
    }

    #[test]
    fn limits_and_empty_queries() {
        let idx = index();
        assert_eq!(idx.search("github", 1).len(), 1);
        assert!(idx.search("", 5).is_empty());
        assert!(idx.search("zzzqqq", 5).is_empty());
    }

    #[test]
    fn auto_switches_on_above_the_threshold_only_when_something_can_be_deferred() {
        let s = SearchSettings::default();
        assert!(!s.active(20, 5));
        assert!(s.active(21, 5));
        assert!(!s.active(40, 0));
        let on = SearchSettings {
            mode: SearchMode::On,
            ..s
        };
        assert!(on.active(2, 1));
        let off = SearchSettings {
            mode: SearchMode::Off,
            ..s
        };
        assert!(!off.active(500, 480));
    }

    #[test]
    fn names_split_on_delimiters_and_case() {
        assert_eq!(
            split_name("mcp__gh__searchRepos-v2"),
            "mcp  gh  search Repos v2"
        );
    }
}
