//! Built-in `task_agent`: hands a task to a sub-agent (a fresh session with
//! the tools meant for sub-agents) and returns its answer. Asks for approval:
//! the sub-agent acts on its own, though its risky calls still ask.

use std::collections::BTreeMap;
use turnstone_plugin_sdk::prelude::*;
use turnstone_plugin_sdk::work::agents::{self, TaskError, TaskRequest};

/// Longest prompt accepted.
const MAX_PROMPT: usize = 100_000;

/// Arguments of `task_agent`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskArgs {
    /// The complete task: what to do, where, and what to report back. The
    /// sub-agent sees nothing of this conversation but this.
    pub prompt: String,
    /// A skill for the sub-agent to work under (its instructions and tools).
    #[serde(default)]
    pub skill: Option<String>,
    /// Arguments for the skill's placeholders.
    #[serde(default)]
    pub skill_arguments: BTreeMap<String, String>,
    /// How the sub-agent should work (a persona or style), if it matters.
    #[serde(default)]
    pub persona: Option<String>,
    /// A model alias for the sub-agent (default: the operator's agent model).
    #[serde(default)]
    pub model: Option<String>,
}

fn check(args: &TaskArgs) -> Result<(), ToolError> {
    if args.prompt.trim().is_empty() {
        return Err(ToolError::new("`prompt` must describe the task"));
    }
    if args.prompt.len() > MAX_PROMPT {
        return Err(ToolError::new(format!(
            "`prompt` is {} bytes; at most {MAX_PROMPT} are accepted",
            args.prompt.len()
        )));
    }
    Ok(())
}

/// The first line of the prompt, cut for a header.
fn headline(prompt: &str) -> String {
    let line = prompt.trim().lines().next().unwrap_or("").trim();
    let mut h: String = line.chars().take(80).collect();
    if h.len() < line.len() {
        h.push('…');
    }
    h
}

/// `task_agent`.
pub struct TaskAgent;

impl Tool for TaskAgent {
    type Args = TaskArgs;
    const NAME: &'static str = "task_agent";
    const DESCRIPTION: &'static str = "Delegate a self-contained task to an autonomous sub-agent that can read, search, edit files and run commands in the workspace, then returns its final answer. Give it a complete prompt: it sees nothing of this conversation. Use it for work that takes many steps on its own, such as investigating a bug across files or making a well-described change.";

    fn meta() -> ToolMeta {
        ToolMeta {
            // Offered to sub-agents too: the host stops it at the depth limit.
            task_agent: true,
            primary_key: Some("prompt"),
            ..ToolMeta::default()
        }
    }

    fn prepare(args: &TaskArgs, _ctx: &Context) -> Result<Preview, ToolError> {
        check(args)?;
        let mut body = args.prompt.trim().to_string();
        for (label, v) in [
            ("skill", args.skill.as_deref()),
            ("persona", args.persona.as_deref()),
            ("model", args.model.as_deref()),
        ] {
            if let Some(v) = v.filter(|v| !v.trim().is_empty()) {
                body.push_str(&format!("\n{label}: {v}"));
            }
        }
        Ok(Preview::ask(format!("task_agent: {}", headline(&args.prompt))).with_body(body))
    }

    fn execute(args: TaskArgs, ctx: &Context) -> Result<Output, ToolError> {
        check(&args)?;
        let request = TaskRequest {
            prompt: args.prompt,
            skill: args.skill,
            skill_arguments: args.skill_arguments.into_iter().collect(),
            persona: args.persona,
            model: args.model,
        };
        match agents::run_task(&request) {
            Ok(r) => {
                ctx.emit(&format!(
                    "sub-agent {} finished: {} model call(s), {} tool call(s), {} tokens\n",
                    r.workstream_id, r.model_calls, r.tool_calls, r.tokens
                ));
                Ok(r.answer.into())
            }
            Err(TaskError::Cancelled) => Err(ToolError::new("the sub-agent was cancelled")),
            Err(e) => Err(ToolError::new(e.to_string())),
        }
    }
}

register_tools!(TaskAgent);
