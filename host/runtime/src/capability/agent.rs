//! The capabilities of WIT 0.2.0's agent interfaces: `session`, `memory`,
//! `history`, `skills`, `agents`, `watches`, `notify` and `preview`. Like `model`, each is requested in the manifest
//! and granted by the operator; the effective level is the lower of the two.

use super::{Access, CapabilityKind, Denial, EffectiveCapabilities};

impl EffectiveCapabilities {
    fn agent_denial(&self, kind: CapabilityKind, detail: &str, grant: &str) -> Denial {
        let key = kind.as_str();
        let requested = match kind {
            CapabilityKind::Memory => self.requested.memory.is_some(),
            CapabilityKind::History => self.requested.history,
            CapabilityKind::Skills => self.requested.skills.is_some(),
            CapabilityKind::Session => self.requested.session,
            CapabilityKind::Agents => self.requested.agents,
            CapabilityKind::Watches => self.requested.watches,
            CapabilityKind::Notify => self.requested.notify,
            CapabilityKind::Preview => self.requested.preview,
            _ => false,
        };
        let hint = if requested {
            format!(
                "grant it with [plugins.grants.{}] {key} = {grant}",
                self.plugin
            )
        } else {
            format!(
                "the plugin's manifest does not request it: add {key} = {grant} under [capabilities] in its plugin.toml, then grant it with [plugins.grants.{}] {key} = {grant}",
                self.plugin
            )
        };
        Denial {
            plugin: self.plugin.clone(),
            capability: kind,
            detail: detail.to_string(),
            hint,
        }
    }

    /// Checks learning who and where the caller is.
    pub fn check_session(&self) -> Result<(), Denial> {
        if self.requested.session && self.granted.session {
            Ok(())
        } else {
            Err(self.agent_denial(
                CapabilityKind::Session,
                "the calling session's identity",
                "true",
            ))
        }
    }

    /// Checks running sub-agents.
    pub fn check_agents(&self) -> Result<(), Denial> {
        self.check_flag(
            CapabilityKind::Agents,
            self.requested.agents && self.granted.agents,
            "running a sub-agent",
        )
    }

    /// Checks the caller's watches.
    pub fn check_watches(&self) -> Result<(), Denial> {
        self.check_flag(
            CapabilityKind::Watches,
            self.requested.watches && self.granted.watches,
            "the calling workstream's watches",
        )
    }

    /// Checks the caller's notification targets.
    pub fn check_notify(&self) -> Result<(), Denial> {
        self.check_flag(
            CapabilityKind::Notify,
            self.requested.notify && self.granted.notify,
            "the caller's notification targets",
        )
    }

    /// Checks the preview pane.
    pub fn check_preview(&self) -> Result<(), Denial> {
        self.check_flag(
            CapabilityKind::Preview,
            self.requested.preview && self.granted.preview,
            "the calling session's preview pane",
        )
    }

    fn check_flag(&self, kind: CapabilityKind, held: bool, detail: &str) -> Result<(), Denial> {
        if held {
            Ok(())
        } else {
            Err(self.agent_denial(kind, detail, "true"))
        }
    }

    /// Checks reading (`need` = read-only) or writing the caller's memories.
    pub fn check_memory(&self, need: Access) -> Result<(), Denial> {
        let have = self.requested.memory.min(self.granted.memory);
        if have.is_some_and(|a| a >= need) {
            Ok(())
        } else {
            let what = match need {
                Access::ReadOnly => "reading memories",
                Access::ReadWrite => "saving or deleting memories",
            };
            Err(self.agent_denial(
                CapabilityKind::Memory,
                what,
                &format!("\"{}\"", access_word(need)),
            ))
        }
    }

    /// Checks searching the caller's past conversations.
    pub fn check_history(&self) -> Result<(), Denial> {
        if self.requested.history && self.granted.history {
            Ok(())
        } else {
            Err(self.agent_denial(
                CapabilityKind::History,
                "searching the caller's past conversations",
                "true",
            ))
        }
    }

    /// Checks reading (`need` = read-only) or saving skills.
    pub fn check_skills(&self, need: Access) -> Result<(), Denial> {
        let have = self.requested.skills.min(self.granted.skills);
        if have.is_some_and(|a| a >= need) {
            Ok(())
        } else {
            let what = match need {
                Access::ReadOnly => "reading the skills catalogue",
                Access::ReadWrite => "saving skills",
            };
            Err(self.agent_denial(
                CapabilityKind::Skills,
                what,
                &format!("\"{}\"", access_word(need)),
            ))
        }
    }
}

fn access_word(a: Access) -> &'static str {
    match a {
        Access::ReadOnly => "read-only",
        Access::ReadWrite => "read-write",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capability::Capabilities;

    fn caps(req: &str, grant: &str) -> EffectiveCapabilities {
        let r: Capabilities = toml::from_str(req).unwrap();
        let g: Capabilities = toml::from_str(grant).unwrap();
        EffectiveCapabilities::new("mem", &r, &g, None).0
    }

    #[test]
    fn the_lower_of_request_and_grant_decides_with_the_grant_to_add() {
        let c = caps("memory = \"read-write\"", "memory = \"ro\"");
        assert!(c.check_memory(Access::ReadOnly).is_ok());
        let d = c.check_memory(Access::ReadWrite).unwrap_err();
        assert_eq!(d.capability.as_str(), "memory");
        assert_eq!(
            d.hint,
            "grant it with [plugins.grants.mem] memory = \"read-write\""
        );
        let c = caps("memory = \"ro\"", "memory = \"rw\"");
        assert!(
            c.check_memory(Access::ReadWrite).is_err(),
            "request caps it"
        );
        let c = caps("", "history = true\nsession = true\nskills = \"rw\"");
        let d = c.check_history().unwrap_err();
        assert!(
            d.hint.contains("manifest does not request it"),
            "{}",
            d.hint
        );
        assert!(c.check_session().is_err());
        assert!(c.check_skills(Access::ReadOnly).is_err());
        let c = caps(
            "history = true\nsession = true\nskills = \"read-write\"",
            "history = true\nsession = true\nskills = \"read-only\"",
        );
        assert!(c.check_history().is_ok() && c.check_session().is_ok());
        assert!(c.check_skills(Access::ReadOnly).is_ok());
        assert!(c.check_skills(Access::ReadWrite).is_err());
    }
}
