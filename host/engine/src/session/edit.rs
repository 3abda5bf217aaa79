//! Edits of the conversation a front end asks for: clear, rewind, retry and
//! switching the model alias.

use super::{ChatSession, SessionError};
use crate::turn::{Role, Turn};
use turnstone_protocol::SessionState;

/// Workstream config key holding the alias chosen with `/model`.
pub const MODEL_ALIAS_KEY: &str = "model_alias";

/// Why an edit was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EditError {
    /// Nothing to rewind or retry.
    #[error("there is no earlier message to {0}")]
    NothingToEdit(&'static str),
    /// Rewind count out of range.
    #[error("cannot rewind {asked} message(s): only {available} can be rewound")]
    TooFar {
        /// Requested.
        asked: usize,
        /// Available since the start (or the last compaction).
        available: usize,
    },
    /// `/model` without a live registry.
    #[error("this session was started with a fixed model binding; it cannot switch models")]
    FixedModel,
    /// A skill could not be activated (unknown, bad arguments, none configured).
    #[error("{0}")]
    Skill(String),
}

/// A user turn the user typed (not a compaction or system artifact).
fn is_real_user(t: &Turn) -> bool {
    t.role == Role::User && t.meta.source.is_none()
}

impl ChatSession {
    /// Forgets the in-memory context (the model starts fresh); the stored
    /// history is kept for `--resume`.
    pub fn clear(&mut self) {
        self.turns.clear();
        self.row_ids.clear();
        self.compact_due = false;
        self.last_prompt_tokens = None;
    }

    /// Indices of the user messages that may be rewound to, oldest first.
    fn user_positions(&self) -> Vec<usize> {
        self.turns
            .iter()
            .enumerate()
            .filter(|(_, t)| is_real_user(t))
            .map(|(i, _)| i)
            .collect()
    }

    /// Drops `turns[idx..]` from memory and storage.
    async fn cut(&mut self, idx: usize) -> Result<(), SessionError> {
        let keep_through = self.row_ids[..idx.min(self.row_ids.len())]
            .iter()
            .copied()
            .max()
            .unwrap_or(0);
        if let Some((db, ws_id)) = &self.store {
            db.truncate_turns(ws_id, keep_through).await?;
        }
        self.turns.truncate(idx);
        self.row_ids.truncate(idx);
        self.last_saved_id = keep_through;
        self.compact_due = false;
        Ok(())
    }

    /// Removes the last `n` user messages and everything after each of them.
    /// Returns the text of the earliest message removed (to edit and resend).
    pub async fn rewind(&mut self, n: usize) -> Result<String, SessionError> {
        let users = self.user_positions();
        if n == 0 || users.is_empty() {
            return Err(EditError::NothingToEdit("rewind").into());
        }
        if n > users.len() {
            return Err(EditError::TooFar {
                asked: n,
                available: users.len(),
            }
            .into());
        }
        let idx = users[users.len() - n];
        let text = self.turns[idx].text_content();
        self.cut(idx).await?;
        self.state(SessionState::Idle);
        Ok(text)
    }

    /// Whether [`Self::retry`] has a message to ask again.
    pub fn check_retry(&self) -> Result<(), SessionError> {
        if self.user_positions().is_empty() {
            Err(EditError::NothingToEdit("retry").into())
        } else {
            Ok(())
        }
    }

    /// Drops the answer to the last user message and asks the model again.
    pub async fn retry(&mut self) -> Result<(), SessionError> {
        let Some(&idx) = self.user_positions().last() else {
            return Err(EditError::NothingToEdit("retry").into());
        };
        let text = self.turns[idx].text_content();
        // Images sent with the message go to the model again.
        let images: Vec<crate::ContentPart> = self.turns[idx]
            .content
            .iter()
            .filter(|p| matches!(p, crate::ContentPart::Image { .. }))
            .cloned()
            .collect();
        self.cut(idx).await?;
        self.send_with(&text, images).await
    }

    /// Switches the model alias for the next turn (checked now) and saves it
    /// with the workstream, so a resumed session uses it again.
    pub async fn set_model_alias(&mut self, alias: &str) -> Result<(), SessionError> {
        self.apply_model_alias(alias)?;
        if let Some((db, ws_id)) = &self.store {
            db.set_config(ws_id, MODEL_ALIAS_KEY, Some(alias)).await?;
        }
        Ok(())
    }

    pub(super) fn apply_model_alias(&mut self, alias: &str) -> Result<(), SessionError> {
        let Some((live, current)) = &mut self.live else {
            return Err(EditError::FixedModel.into());
        };
        let (primary, fallbacks) = live.bindings(Some(alias))?;
        *current = Some(alias.to_string());
        self.binding = primary;
        self.fallbacks = fallbacks;
        Ok(())
    }

    /// The alias in use (`None` = the registry default) and the model id.
    pub fn model(&self) -> (Option<&str>, &str) {
        (
            self.live.as_ref().and_then(|(_, a)| a.as_deref()),
            &self.binding.model,
        )
    }

    /// The context window of the current binding.
    pub fn context_window(&self) -> u32 {
        self.binding.context_window
    }

    /// Tool names that are auto-approved from now on (`a` answers).
    pub fn always_approved(&self) -> Vec<String> {
        let set = self.always.lock().unwrap_or_else(|p| p.into_inner());
        let mut names: Vec<String> = set.iter().cloned().collect();
        names.sort();
        names
    }
}
