//! Built-in shell tools: `bash` (foreground with streamed output, or a
//! background shell), `bash_output` and `kill_shell`. Commands run through the
//! host's process capability in the session's working directory; the host
//! scrubs credential-like variables from the child's environment and kills the
//! whole process group on cancel or timeout.

pub mod guard;
pub mod output;
pub mod shell;

use output::{Stream, Transcript};
use turnstone_plugin_sdk::prelude::*;
use turnstone_plugin_sdk::process::{self, ChunkWait, ExitStatus, StreamKind};
use turnstone_plugin_sdk::{Context, host};

/// Default timeout when neither the call nor the config sets one.
const DEFAULT_TIMEOUT_SECS: u64 = 120;
/// Longest timeout a call may ask for.
const MAX_TIMEOUT_SECS: u64 = 600;
/// How often a running command checks its deadline and cancellation.
const POLL_MS: u64 = 200;

/// Arguments of `bash`.
#[derive(Deserialize, JsonSchema)]
pub struct BashArgs {
    /// The bash command to execute.
    pub command: String,
    /// Timeout in seconds (1-600). Omit to use the configured default (typically 120 s).
    #[serde(default)]
    pub timeout: Option<u64>,
    /// Enable `set -e` so the script exits on the first command failure. Default false.
    #[serde(default)]
    pub stop_on_error: bool,
    /// Run in the background and return a shell id (`bash_N`) at once; read its
    /// output with bash_output and stop it with kill_shell.
    #[serde(default)]
    pub run_in_background: bool,
}

fn prepared_command(args: &BashArgs, ctx: &Context) -> Result<String, ToolError> {
    let command = guard::sanitize(&args.command);
    if command.trim().is_empty() {
        return Err(ToolError::new("Error: the command is empty."));
    }
    // Paths inside the workspace are the user's own, wherever it lives.
    let allowed: Vec<std::path::PathBuf> = ctx
        .workspace_dir
        .iter()
        .cloned()
        .chain(std::iter::once(ctx.working_dir.clone()))
        .filter(|p| p.components().count() > 1)
        .collect();
    if let Some(why) = guard::blocked(&command, &allowed) {
        return Err(ToolError::new(format!(
            "Blocked: this command looks destructive ({why}) and was not run. If it is really needed, ask the user to run it themselves."
        )));
    }
    if let Some(t) = args.timeout
        && !(1..=MAX_TIMEOUT_SECS).contains(&t)
    {
        return Err(ToolError::new(format!(
            "Error: timeout must be between 1 and {MAX_TIMEOUT_SECS} seconds (got {t})."
        )));
    }
    Ok(if args.stop_on_error {
        format!("set -e\n{command}")
    } else {
        command
    })
}

fn timeout_secs(args: &BashArgs) -> u64 {
    args.timeout.unwrap_or_else(|| {
        host::config("timeout")
            .and_then(|v| v.trim().parse().ok())
            .filter(|t| (1..=MAX_TIMEOUT_SECS).contains(t))
            .unwrap_or(DEFAULT_TIMEOUT_SECS)
    })
}

fn header(command: &str) -> String {
    let first = command.lines().next().unwrap_or_default();
    let mut h: String = first.chars().take(120).collect();
    if h.len() < first.len() || command.lines().nth(1).is_some() {
        h.push_str(" …");
    }
    format!("bash: {h}")
}

fn shell_command(command: &str, ctx: &Context) -> process::Command {
    process::Command::new("bash")
        .arg("-c")
        .arg(command)
        .cwd(ctx.working_dir.to_string_lossy())
}

fn describe_status(status: ExitStatus) -> (String, bool) {
    match status {
        ExitStatus::Exited(0) => (String::new(), false),
        ExitStatus::Exited(code) => (format!("[exit code: {code}]"), code >= 2),
        ExitStatus::Signaled(sig) => (format!("[killed by signal {sig}]"), true),
    }
}

/// `bash`.
pub struct Bash;

impl Tool for Bash {
    type Args = BashArgs;
    const NAME: &'static str = "bash";
    const DESCRIPTION: &'static str = "Execute a bash command and return stdout and stderr (stderr lines are prefixed with [stderr]). Output over 256 KB keeps its head and tail. Exit codes of 2 or more, signals and timeouts are errors. Set run_in_background for long-running processes (servers, watchers) and poll them with bash_output.";

    fn meta() -> ToolMeta {
        ToolMeta {
            task_agent: true,
            primary_key: Some("command"),
            cwd_note: Some("Commands run in {working_dir}."),
            ..ToolMeta::default()
        }
    }

    fn prepare(args: &BashArgs, ctx: &Context) -> Result<Preview, ToolError> {
        let command = prepared_command(args, ctx)?;
        let mut preview = Preview::ask(header(&args.command));
        if command.lines().nth(1).is_some() || command.len() > 120 {
            preview = preview.with_body(command);
        }
        Ok(preview)
    }

    fn execute(args: BashArgs, ctx: &Context) -> Result<Output, ToolError> {
        let command = prepared_command(&args, ctx)?;
        if args.run_in_background {
            let handle = shell_command(&command, ctx)
                .spawn_background()
                .map_err(|e| ToolError::new(format!("Error: {e}")))?;
            return Ok(format!(
                "Started background shell bash_{handle}. Read its output with bash_output(shell_id=\"bash_{handle}\") and stop it with kill_shell."
            )
            .into());
        }
        let timeout = timeout_secs(&args);
        let child = shell_command(&command, ctx)
            .spawn()
            .map_err(|e| ToolError::new(format!("Error: {e}")))?;
        let deadline = host::now_ms() + timeout * 1000;
        let mut transcript = Transcript::default();
        let mut stopped = None;
        loop {
            let now = host::now_ms();
            if now >= deadline {
                child.kill();
                stopped = Some(format!(
                    "[timed out after {timeout} s; the process group was killed]"
                ));
                break;
            }
            match child.next_chunk_timeout(POLL_MS.min(deadline - now)) {
                ChunkWait::Chunk(chunk) => {
                    let stream = match chunk.stream {
                        StreamKind::Stdout => Stream::Out,
                        StreamKind::Stderr => Stream::Err,
                    };
                    for line in transcript.push(stream, &chunk.data) {
                        if !ctx.emit(&line) {
                            child.kill();
                            stopped = Some("[cancelled; the process group was killed]".into());
                        }
                    }
                    if stopped.is_some() {
                        break;
                    }
                }
                ChunkWait::Pending => {
                    // An empty chunk asks the host whether the call was cancelled.
                    if !ctx.emit("") {
                        child.kill();
                        stopped = Some("[cancelled; the process group was killed]".into());
                        break;
                    }
                }
                ChunkWait::Closed => break,
            }
        }
        for line in transcript.finish() {
            ctx.emit(&line);
        }
        let mut text = transcript.text();
        let failed = if let Some(note) = stopped {
            push_note(&mut text, &note);
            true
        } else {
            let (note, failed) = describe_status(child.wait());
            push_note(&mut text, &note);
            failed
        };
        if text.is_empty() {
            text = "(no output)".into();
        }
        if failed {
            Err(ToolError::output(text))
        } else {
            Ok(text.into())
        }
    }
}

fn push_note(text: &mut String, note: &str) {
    if note.is_empty() {
        return;
    }
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(note);
}

fn parse_shell_id(id: &str) -> Result<u32, ToolError> {
    id.trim()
        .strip_prefix("bash_")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| {
            ToolError::new(format!(
                "Error: {id:?} is not a shell id (expected bash_N)."
            ))
        })
}

/// Arguments of `bash_output`.
#[derive(Deserialize, JsonSchema)]
pub struct BashOutputArgs {
    /// The background shell id returned by bash (e.g. `bash_1`).
    pub shell_id: String,
    /// Only return lines matching this regular expression.
    #[serde(default)]
    pub filter: Option<String>,
}

/// `bash_output`.
pub struct BashOutput;

impl Tool for BashOutput {
    type Args = BashOutputArgs;
    const NAME: &'static str = "bash_output";
    const DESCRIPTION: &'static str = "Read new output of a background shell started with bash(run_in_background=true): only what arrived since the previous read, optionally filtered by a regular expression, plus whether it is still running.";

    fn meta() -> ToolMeta {
        ToolMeta {
            auto_approve: true,
            task_agent: true,
            primary_key: Some("shell_id"),
            ..ToolMeta::default()
        }
    }

    fn prepare(args: &BashOutputArgs, _ctx: &Context) -> Result<Preview, ToolError> {
        parse_shell_id(&args.shell_id)?;
        if let Some(f) = &args.filter {
            regex::Regex::new(f)
                .map_err(|e| ToolError::new(format!("Error: invalid filter: {e}")))?;
        }
        Ok(Preview::auto(format!("bash_output: {}", args.shell_id)))
    }

    fn execute(args: BashOutputArgs, _ctx: &Context) -> Result<Output, ToolError> {
        let handle = parse_shell_id(&args.shell_id)?;
        let filter = match &args.filter {
            Some(f) => Some(
                regex::Regex::new(f)
                    .map_err(|e| ToolError::new(format!("Error: invalid filter: {e}")))?,
            ),
            None => None,
        };
        let Some(out) = process::read_background(handle) else {
            return Err(ToolError::new(format!(
                "Error: no background shell {} in this session (it may have finished and been read already).",
                args.shell_id
            )));
        };
        let mut transcript = Transcript::default();
        transcript.push(Stream::Out, &out.stdout);
        transcript.push(Stream::Err, &out.stderr);
        transcript.finish();
        let mut text: String = match &filter {
            Some(re) => transcript
                .text()
                .lines()
                .filter(|l| re.is_match(l))
                .map(|l| format!("{l}\n"))
                .collect(),
            None => transcript.text(),
        };
        if out.dropped > 0 {
            push_note(
                &mut text,
                &format!(
                    "[{} bytes were dropped because the output was not read in time]",
                    out.dropped
                ),
            );
        }
        let state = match out.status {
            None => "[still running]".to_string(),
            Some(s) => match describe_status(s).0.as_str() {
                "" => "[finished: exit code 0]".to_string(),
                note => format!("[finished: {}]", note.trim_matches(['[', ']'])),
            },
        };
        if text.is_empty() {
            text = "(no new output)".into();
        }
        push_note(&mut text, &state);
        Ok(text.into())
    }
}

/// Arguments of `kill_shell`.
#[derive(Deserialize, JsonSchema)]
pub struct KillShellArgs {
    /// The background shell id to stop (e.g. `bash_1`).
    pub shell_id: String,
}

/// `kill_shell`.
pub struct KillShell;

impl Tool for KillShell {
    type Args = KillShellArgs;
    const NAME: &'static str = "kill_shell";
    const DESCRIPTION: &'static str = "Stop a background shell (kills its whole process group).";

    fn meta() -> ToolMeta {
        ToolMeta {
            auto_approve: true,
            task_agent: true,
            primary_key: Some("shell_id"),
            ..ToolMeta::default()
        }
    }

    fn execute(args: KillShellArgs, _ctx: &Context) -> Result<Output, ToolError> {
        let handle = parse_shell_id(&args.shell_id)?;
        if process::kill_background(handle) {
            Ok(format!("Killed background shell {}.", args.shell_id).into())
        } else {
            Err(ToolError::new(format!(
                "Error: no background shell {} in this session.",
                args.shell_id
            )))
        }
    }
}

turnstone_plugin_sdk::register_tools!(Bash, BashOutput, KillShell);
