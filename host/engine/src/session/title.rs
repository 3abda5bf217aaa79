//! Workstream titles: after the first exchange of a workstream that has no
//! title, one short tool-less model call (the session's model, or the
//! `[titles] model` alias) names it; the title is stored and announced as
//! `title_updated`. It runs beside the session, after the turn has ended, so
//! it never delays an answer, and a failure only leaves the workstream
//! untitled.

use super::model_access::SessionModel;
use super::{ChatSession, ModelBinding};
use crate::events::EventSink;
use crate::turn::Role;
use turnstone_protocol::{Event, TitleUpdated};
use turnstone_runtime::ModelAccess;
use turnstone_storage::Storage;

/// What the title call is told.
const TITLE_SYSTEM: &str = "You name conversations. Reply with a short title (2 to 6 words) for \
the conversation below: no quotes, no trailing punctuation, nothing else.";
/// Characters of each message the title call sees.
const EXCERPT: usize = 1_000;
/// Longest title kept, in characters.
const MAX_TITLE: usize = 80;
/// Tokens the title call may answer with (reasoning models need headroom).
const TITLE_TOKENS: u32 = 256;

/// The title call for one workstream, ready to run on its own.
pub struct TitleJob {
    model: SessionModel,
    db: Storage,
    ws_id: String,
    events: EventSink,
    prompt: String,
}

impl ChatSession {
    /// Names this session's workstream after its first exchange, with
    /// `binding` (`None`: the session's own model).
    pub fn with_titles(mut self, binding: Option<ModelBinding>) -> Self {
        self.titles = Some(binding);
        self
    }

    /// The title call due now: titles are on, this was the workstream's
    /// first exchange, and it has no title or alias yet. Asked once per
    /// session.
    pub async fn title_job(&mut self) -> Option<TitleJob> {
        let binding = self.titles.clone()?;
        if self.titled {
            return None;
        }
        let (db, ws_id) = self.store.clone()?;
        let mut users = self
            .turns
            .iter()
            .filter(|t| t.role == Role::User && t.meta.source.is_none());
        let first = users.next()?.text_content();
        if users.next().is_some() {
            // Resumed or already long: not the first exchange.
            self.titled = true;
            return None;
        }
        let answer = self
            .turns
            .iter()
            .rev()
            .find(|t| t.role == Role::Assistant && !t.text_content().trim().is_empty())?
            .text_content();
        self.titled = true;
        match db.get_workstream(&ws_id).await {
            Ok(Some(w)) if w.title.is_none() && w.alias.is_none() => {}
            _ => return None,
        }
        Some(TitleJob {
            model: SessionModel {
                binding: binding.unwrap_or_else(|| self.binding.clone()),
                cancel: tokio_util::sync::CancellationToken::new(),
                usage: self.ledger().map(|l| (l, super::usage::Purpose::Title)),
            },
            db,
            ws_id,
            events: self.events.clone(),
            prompt: format!(
                "User: {}\n\nAssistant: {}",
                excerpt(&first),
                excerpt(&answer)
            ),
        })
    }
}

impl TitleJob {
    /// Cancels the title call when `token` is (the workstream closed).
    pub fn stopped_by(mut self, token: tokio_util::sync::CancellationToken) -> Self {
        self.model.cancel = token;
        self
    }

    /// Asks for the title, stores it and emits `title_updated`; returns it.
    /// A title set meanwhile (by `/name` or the API) is left alone.
    pub async fn run(self) -> Option<String> {
        let text = match self
            .model
            .complete(TITLE_SYSTEM.into(), self.prompt, TITLE_TOKENS)
            .await
        {
            Ok(t) => t,
            Err(e) => {
                tracing::info!(workstream = %self.ws_id, "no title generated: {e}");
                return None;
            }
        };
        let title = clean(&text)?;
        match self.db.set_title_if_unnamed(&self.ws_id, &title).await {
            Ok(true) => {}
            // Named meanwhile (`/name`, the API): theirs stands.
            Ok(false) => return None,
            Err(e) => {
                tracing::warn!(workstream = %self.ws_id, "cannot store the title: {e}");
                return None;
            }
        }
        self.events.emit(Event::TitleUpdated(TitleUpdated {
            title: title.clone(),
        }));
        Some(title)
    }
}

fn excerpt(text: &str) -> String {
    let t = text.trim();
    if t.chars().count() <= EXCERPT {
        return t.to_string();
    }
    let mut s: String = t.chars().take(EXCERPT).collect();
    s.push('…');
    s
}

/// The title in a model's answer: its first non-empty line without
/// reasoning tags, markdown, quotes or a `Title:` label, cut at a word.
pub fn clean(answer: &str) -> Option<String> {
    let without_think = match answer.rfind("</think>") {
        Some(i) => &answer[i + "</think>".len()..],
        None => answer,
    };
    let line = without_think
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())?;
    let mut t = line.trim_start_matches('#').trim();
    for label in ["Title:", "title:", "TITLE:"] {
        if let Some(rest) = t.strip_prefix(label) {
            t = rest.trim();
        }
    }
    let t = t
        .trim_matches(|c: char| matches!(c, '"' | '\'' | '*' | '`' | '“' | '”' | '‘' | '’'))
        .trim_end_matches(['.', '!', ':', ';', ','])
        .trim();
    if t.is_empty() {
        return None;
    }
    if t.chars().count() <= MAX_TITLE {
        return Some(t.to_string());
    }
    let cut: String = t.chars().take(MAX_TITLE).collect();
    let cut = match cut.rfind(' ') {
        Some(i) if i > MAX_TITLE / 2 => cut[..i].to_string(),
        _ => cut,
    };
    Some(format!("{}…", cut.trim_end()))
}

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn answers_become_one_clean_line() {
        assert_eq!(
            clean("\"Fixing the login bug.\"").as_deref(),
            Some("Fixing the login bug")
        );
        assert_eq!(
            clean("<think>hmm</think>\n\nTitle: **Rust build flags**").as_deref(),
            Some("Rust build flags")
        );
        assert_eq!(
            clean("# Deploy plan\nmore text").as_deref(),
            Some("Deploy plan")
        );
        assert_eq!(clean("  \n \"\" "), None);
        let long = "word ".repeat(40);
        let t = clean(&long).unwrap();
        assert!(t.chars().count() <= 81 && t.ends_with('…'), "{t}");
    }
}
