//! Built-in `watch`: `create` a durable watch of the workstream (a command
//! polled every `poll_every` until `stop_on` holds, or until its output
//! changes), `list` the active ones, `cancel` one. The host schedules and
//! runs the polls; the result joins the conversation and wakes it.

use std::time::Duration;
use turnstone_plugin_sdk::prelude::*;
use turnstone_plugin_sdk::work::watches::{self, Watch, WatchSpec};

/// Shortest and longest poll interval (the host holds them too).
const MIN_POLL: Duration = Duration::from_secs(10);
const MAX_POLL: Duration = Duration::from_secs(24 * 3600);

/// What to do.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Start a watch (asks for approval: it runs a command repeatedly).
    Create,
    /// The workstream's active watches.
    List,
    /// Stop one by name or id prefix.
    Cancel,
}

/// Arguments of `watch`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WatchArgs {
    /// `create`, `list` or `cancel`.
    pub action: Action,
    /// Shell command to poll (create).
    #[serde(default)]
    pub command: Option<String>,
    /// Poll interval as a duration: `30s`, `5m`, `2h30m` (10s to 24h; default 5m).
    #[serde(default)]
    pub poll_every: Option<String>,
    /// Stop condition, evaluated after each poll, e.g. `exit_code == 0`,
    /// `"ready" in output.lower()`, `data["state"] == "MERGED"`,
    /// `output matches "v\\d+\\.\\d+"`. Variables: output, data (output
    /// parsed as JSON, else None), exit_code, prev_output, changed, polls.
    /// Omit it to stop when the output changes.
    #[serde(default)]
    pub stop_on: Option<String>,
    /// Name of the watch (create: unique among active ones; cancel: which).
    #[serde(default)]
    pub name: Option<String>,
    /// Polls before it gives up (default 100).
    #[serde(default)]
    pub max_polls: Option<u64>,
}

fn need<'a>(v: &'a Option<String>, what: &str) -> Result<&'a str, ToolError> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ToolError::new(format!("`{what}` is required for this action")))
}

/// `poll_every` in seconds, checked against the limits.
pub fn interval(text: Option<&str>) -> Result<u64, ToolError> {
    let Some(t) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(300);
    };
    let d = humantime::parse_duration(t).map_err(|e| {
        ToolError::new(format!(
            "poll_every {t:?} is not a duration like 30s, 5m or 2h30m ({e})"
        ))
    })?;
    if d < MIN_POLL || d > MAX_POLL {
        return Err(ToolError::new(format!(
            "poll_every {t:?} must be between 10s and 24h"
        )));
    }
    Ok(d.as_secs())
}

fn every(secs: u64) -> String {
    humantime::format_duration(Duration::from_secs(secs)).to_string()
}

fn describe(w: &Watch) -> String {
    let until = match &w.stop_on {
        Some(c) => format!("until `{c}`"),
        None => "until its output changes".into(),
    };
    let next = w
        .next_poll
        .as_deref()
        .map(|n| format!(", next poll {n}"))
        .unwrap_or_default();
    format!(
        "{} (id {}): `{}` every {} {until}; {} of {} polls done{next}",
        w.name,
        &w.id[..w.id.len().min(8)],
        w.command,
        every(w.poll_every_secs),
        w.polls,
        w.max_polls
    )
}

fn spec(args: &WatchArgs) -> Result<WatchSpec, ToolError> {
    let command = need(&args.command, "command")?.to_string();
    let name = need(&args.name, "name")?.to_string();
    let poll_every_secs = interval(args.poll_every.as_deref())?;
    let stop_on = args
        .stop_on
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    if let Some(c) = &stop_on {
        watches::check_condition(c).map_err(|e| ToolError::new(format!("stop_on: {e}")))?;
    }
    Ok(WatchSpec {
        name,
        command,
        poll_every_secs,
        stop_on,
        max_polls: args.max_polls.unwrap_or(100),
    })
}

/// `watch`.
pub struct WatchTool;

impl Tool for WatchTool {
    type Args = WatchArgs;
    const NAME: &'static str = "watch";
    const DESCRIPTION: &'static str = "Poll a shell command on a schedule within this workstream (CI runs, deployments, reviews, files) and get its result as a message when a stop condition holds, even while the conversation is idle. action=create starts one (name, command, poll_every like 30s or 5m, stop_on like `exit_code == 0` or `\"ready\" in output`; without stop_on it stops when the output changes); list shows the active ones; cancel stops one by name.";

    fn meta() -> ToolMeta {
        ToolMeta {
            primary_key: Some("command"),
            ..ToolMeta::default()
        }
    }

    fn prepare(args: &WatchArgs, _ctx: &Context) -> Result<Preview, ToolError> {
        match args.action {
            Action::Create => {
                let s = spec(args)?;
                let until = match &s.stop_on {
                    Some(c) => format!("until {c}"),
                    None => "until its output changes".into(),
                };
                Ok(Preview::ask(format!(
                    "watch create {}: `{}` every {} {until}",
                    s.name,
                    s.command,
                    every(s.poll_every_secs)
                ))
                .with_body(format!(
                    "{}\n(at most {} polls, each run as bash in the workspace)",
                    s.command, s.max_polls
                )))
            }
            Action::List => Ok(Preview::auto("watch list")),
            Action::Cancel => Ok(Preview::auto(format!(
                "watch cancel {}",
                need(&args.name, "name")?
            ))),
        }
    }

    fn execute(args: WatchArgs, _ctx: &Context) -> Result<Output, ToolError> {
        match args.action {
            Action::Create => {
                let w =
                    watches::create(&spec(&args)?).map_err(|e| ToolError::new(e.to_string()))?;
                Ok(format!(
                    "Watch created: {}. Its result will arrive as a message when it fires.",
                    describe(&w)
                )
                .into())
            }
            Action::List => {
                let all = watches::list().map_err(|e| ToolError::new(e.to_string()))?;
                if all.is_empty() {
                    return Ok("No active watches in this workstream.".to_string().into());
                }
                Ok(all
                    .iter()
                    .map(|w| format!("- {}", describe(w)))
                    .collect::<Vec<_>>()
                    .join("\n")
                    .into())
            }
            Action::Cancel => {
                let name = need(&args.name, "name")?;
                let w = watches::cancel(name).map_err(|e| ToolError::new(e.to_string()))?;
                Ok(format!("Cancelled watch {} after {} poll(s).", w.name, w.polls).into())
            }
        }
    }
}

register_tools!(WatchTool);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_the_reference_and_are_held_to_its_limits() {
        assert_eq!(interval(None).unwrap(), 300);
        assert_eq!(interval(Some("30s")).unwrap(), 30);
        assert_eq!(interval(Some("5m")).unwrap(), 300);
        assert_eq!(interval(Some("2h30m")).unwrap(), 9000);
        assert_eq!(interval(Some("1h 15m")).unwrap(), 4500);
        assert_eq!(interval(Some("24h")).unwrap(), 86400);
        for bad in ["9s", "25h", "0s"] {
            assert!(
                interval(Some(bad))
                    .unwrap_err()
                    .message()
                    .contains("between 10s and 24h"),
                "{bad}"
            );
        }
        for bad in ["soon", "5 minutes please", "-5m"] {
            assert!(
                interval(Some(bad))
                    .unwrap_err()
                    .message()
                    .contains("not a duration"),
                "{bad}"
            );
        }
    }
}
