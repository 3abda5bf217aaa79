//! The skills catalogue: `SKILL.md` files from the operator's `[skills]
//! dirs` (each `NAME/SKILL.md` or `NAME.md`) and skills saved in the database
//! (`prompt_templates`, every save a new version). A database skill of the
//! same name overrides a file. A document that does not parse is left out
//! and reported; the others load.

use super::doc::{Argument, RiskLevel, SkillDoc, SkillError, parse};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use turnstone_mcp::search::ToolIndex;
use turnstone_storage::Storage;
use turnstone_storage::types::SkillRecord;

/// Where a skill comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillSource {
    /// A file in a skills directory.
    File(PathBuf),
    /// The database (created through the API, the CLI or the skills tool).
    Database,
}

impl SkillSource {
    /// `file` or `database`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::File(_) => "file",
            Self::Database => "database",
        }
    }
}

/// A skill as the catalogue lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillInfo {
    /// Name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Grouping.
    pub category: Option<String>,
    /// Search words.
    pub tags: Vec<String>,
    /// Risk of loading it.
    pub risk_level: RiskLevel,
    /// Version (files are 1; database skills count their saves).
    pub version: u32,
    /// Where it comes from.
    pub source: SkillSource,
    /// The only tools offered while active (empty: all).
    pub allowed_tools: Vec<String>,
    /// Tool calls run without asking while active.
    pub auto_approve: bool,
    /// Arguments.
    pub arguments: Vec<Argument>,
}

/// A skill: what the catalogue lists, and its document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Listing.
    pub info: SkillInfo,
    /// Parsed document.
    pub doc: SkillDoc,
}

impl Skill {
    /// A skill from its parsed document.
    pub fn from_doc(doc: SkillDoc, version: u32, source: SkillSource) -> Self {
        let m = &doc.meta;
        Self {
            info: SkillInfo {
                name: m.name.clone(),
                description: m.description.clone(),
                category: m.category.clone(),
                tags: m.tags.clone(),
                risk_level: m.risk_level,
                version,
                source,
                allowed_tools: m.allowed_tools.clone(),
                auto_approve: m.auto_approve,
                arguments: m.arguments.clone(),
            },
            doc,
        }
    }
}

/// One loaded set of skills.
pub struct Catalog {
    skills: BTreeMap<String, Arc<Skill>>,
    problems: Vec<String>,
    index: ToolIndex,
}

impl Catalog {
    /// A catalogue from parsed files and database rows (latest versions).
    pub fn from_parts(
        files: Vec<(PathBuf, Result<SkillDoc, SkillError>)>,
        rows: &[SkillRecord],
    ) -> Self {
        let mut skills = BTreeMap::new();
        let mut problems = Vec::new();
        for (path, doc) in files {
            match doc {
                Ok(doc) => {
                    let name = doc.meta.name.clone();
                    if skills.contains_key(&name) {
                        problems.push(format!(
                            "{}: skill {name} is already defined by another file; this one is ignored",
                            path.display()
                        ));
                        continue;
                    }
                    skills.insert(
                        name,
                        Arc::new(Skill::from_doc(doc, 1, SkillSource::File(path))),
                    );
                }
                Err(e) => problems.push(format!("{}: {e}", path.display())),
            }
        }
        for row in rows {
            match parse(&row.content) {
                Ok(doc) if doc.meta.name == row.name => {
                    let version = u32::try_from(row.version).unwrap_or(u32::MAX);
                    skills.insert(
                        row.name.clone(),
                        Arc::new(Skill::from_doc(doc, version, SkillSource::Database)),
                    );
                }
                Ok(doc) => problems.push(format!(
                    "database skill {} v{}: the document names itself {}",
                    row.name, row.version, doc.meta.name
                )),
                Err(e) => {
                    problems.push(format!("database skill {} v{}: {e}", row.name, row.version))
                }
            }
        }
        // Search text: description, tags and category (the name is indexed too).
        let texts: Vec<(String, String)> = skills
            .values()
            .map(|s| {
                let i = &s.info;
                (
                    i.name.clone(),
                    format!(
                        "{} {} {}",
                        i.description,
                        i.tags.join(" "),
                        i.category.as_deref().unwrap_or("")
                    ),
                )
            })
            .collect();
        let index = ToolIndex::new(texts.iter().map(|(a, b)| (a.as_str(), b.as_str())));
        Self {
            skills,
            problems,
            index,
        }
    }

    /// Reads every `NAME/SKILL.md` and `NAME.md` under `dirs`.
    pub fn read_dirs(dirs: &[PathBuf]) -> Vec<(PathBuf, Result<SkillDoc, SkillError>)> {
        let mut out = Vec::new();
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            paths.sort();
            for p in paths {
                let file = if p.is_dir() {
                    p.join("SKILL.md")
                } else if p.extension().is_some_and(|e| e == "md") {
                    p
                } else {
                    continue;
                };
                if !file.is_file() {
                    continue;
                }
                let doc = std::fs::read_to_string(&file)
                    .map_err(|e| SkillError::Invalid(format!("cannot read it: {e}")))
                    .and_then(|t| parse(&t));
                out.push((file, doc));
            }
        }
        out
    }

    /// A skill by name.
    pub fn get(&self, name: &str) -> Option<Arc<Skill>> {
        self.skills.get(name).cloned()
    }

    /// Every skill, by name.
    pub fn list(&self) -> impl Iterator<Item = &SkillInfo> {
        self.skills.values().map(|s| &s.info)
    }

    /// The best `limit` matches for `query` (BM25 over name, description,
    /// tags and category).
    pub fn search(&self, query: &str, limit: usize) -> Vec<&SkillInfo> {
        self.index
            .search(query, limit)
            .into_iter()
            .filter_map(|h| self.skills.get(&h.name).map(|s| &s.info))
            .collect()
    }

    /// Documents that were left out, and why.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

/// The catalogue of a host, re-read when older than a moment so skills saved
/// on another node (or through the API) appear without a restart.
pub struct SkillLibrary {
    dirs: Vec<PathBuf>,
    db: Option<Storage>,
    current: tokio::sync::Mutex<Option<(Instant, Arc<Catalog>)>>,
    max_age: Duration,
}

impl SkillLibrary {
    /// Skills from `dirs` and, when given, the database.
    pub fn new(dirs: Vec<PathBuf>, db: Option<Storage>) -> Arc<Self> {
        Arc::new(Self {
            dirs,
            db,
            current: Default::default(),
            max_age: Duration::from_secs(2),
        })
    }

    /// The directories searched.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The database, when skills are stored there.
    pub fn db(&self) -> Option<&Storage> {
        self.db.as_ref()
    }

    /// The catalogue now (re-read when older than two seconds).
    pub async fn catalog(&self) -> Arc<Catalog> {
        let mut cur = self.current.lock().await;
        if let Some((at, c)) = cur.as_ref()
            && at.elapsed() < self.max_age
        {
            return c.clone();
        }
        let c = Arc::new(self.load().await);
        *cur = Some((Instant::now(), c.clone()));
        c
    }

    /// Forgets the cached catalogue (after a save or a delete).
    pub async fn invalidate(&self) {
        *self.current.lock().await = None;
    }

    async fn load(&self) -> Catalog {
        let dirs = self.dirs.clone();
        let files = tokio::task::spawn_blocking(move || Catalog::read_dirs(&dirs))
            .await
            .unwrap_or_default();
        let rows = match &self.db {
            Some(db) => db.latest_skills().await.unwrap_or_else(|e| {
                tracing::warn!("skills: the database could not be read ({e}); files only");
                Vec::new()
            }),
            None => Vec::new(),
        };
        let c = Catalog::from_parts(files, &rows);
        for p in c.problems() {
            tracing::warn!("skill left out: {p}");
        }
        c
    }
}
