//! A plugin's effective capabilities as short lines for people (the
//! approval card shows them next to a call's arguments) and for guards
//! (`call-context.grants`).

use super::{Access, EffectiveCapabilities, HostRule};

impl EffectiveCapabilities {
    /// One line per effective capability: `files rw /path`, `http host`,
    /// `http <public>` (any public address, screened), `exec git`,
    /// `secret NAME to host in header`, `model`, `memory ro`, ….
    pub fn summary(&self) -> Vec<String> {
        let mut out = Vec::new();
        for d in &self.dirs {
            let mode = match d.access {
                Access::ReadOnly => "ro",
                Access::ReadWrite => "rw",
            };
            out.push(format!("files {mode} {}", d.path.display()));
        }
        let configured = self.requested_http.contains(&HostRule::Configured);
        for g in &self.granted_http {
            let effective = match g {
                HostRule::Public => self.requested_http.contains(&HostRule::Public),
                HostRule::Pattern(_) => configured || self.requested_http.contains(g),
                HostRule::Configured => false,
            };
            if effective {
                out.push(format!("http {g}"));
            }
        }
        for p in self
            .requested
            .exec
            .iter()
            .filter(|p| self.granted.exec.contains(p))
        {
            out.push(format!("exec {p}"));
        }
        for s in &self.secrets {
            let hosts: Vec<String> = if s.granted_hosts.is_empty() {
                vec!["its named http hosts".to_string()]
            } else {
                s.granted_hosts.iter().map(ToString::to_string).collect()
            };
            out.push(format!(
                "secret {} to {} in {}",
                s.name,
                hosts.join(", "),
                if s.headers.is_empty() {
                    "no header".to_string()
                } else {
                    s.headers.join(", ")
                }
            ));
        }
        let both = |r: bool, g: bool| r && g;
        let access = |r: Option<Access>, g: Option<Access>| match (r, g) {
            (Some(r), Some(g)) => Some(if r.min(g) == Access::ReadWrite {
                "rw"
            } else {
                "ro"
            }),
            _ => None,
        };
        let (r, g) = (&self.requested, &self.granted);
        if both(r.model, g.model) {
            out.push("model".into());
        }
        if let Some(a) = access(r.memory, g.memory) {
            out.push(format!("memory {a}"));
        }
        if let Some(a) = access(r.skills, g.skills) {
            out.push(format!("skills {a}"));
        }
        for (name, on) in [
            ("history", both(r.history, g.history)),
            ("session", both(r.session, g.session)),
            ("agents", both(r.agents, g.agents)),
            ("watches", both(r.watches, g.watches)),
            ("notify", both(r.notify, g.notify)),
            ("preview", both(r.preview, g.preview)),
        ] {
            if on {
                out.push(name.into());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capability::Capabilities;

    #[test]
    fn the_summary_is_the_intersection() {
        let requested: Capabilities = toml::from_str(
            r#"http = ["api.github.com", "<public>"]
               exec = ["git", "bash"]
               secrets = [{ name = "GH", header = "authorization" }]
               memory = "read-write"
               model = true"#,
        )
        .unwrap();
        let granted: Capabilities = toml::from_str(
            r#"http = ["api.github.com", "evil.example"]
               exec = ["git"]
               secrets = [{ name = "GH", hosts = ["api.github.com"] }]
               memory = "read-only""#,
        )
        .unwrap();
        let (caps, _) = EffectiveCapabilities::new("p", &requested, &granted, None);
        assert_eq!(
            caps.summary(),
            [
                "http api.github.com",
                "exec git",
                "secret GH to api.github.com in authorization",
                "memory ro"
            ]
        );
    }
}
