//! One workstream's terminal front end: renders the engine's callbacks while the
//! workstream is in the foreground, buffers them while it is in the background
//! (replayed on `/ws N`), and hands approval requests to the REPL.

use super::console::Console;
use crate::markdown::{MarkdownStream, Styling};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use turnstone_engine::events::SessionEvent;
use turnstone_protocol::{ApproveRequest, Event, SessionState, ToolItem};

/// Lines kept for a background workstream before the oldest are dropped.
const BUFFER_MAX_LINES: usize = 20_000;
/// Lines of a tool result shown when its output was not streamed.
const RESULT_PREVIEW_LINES: usize = 6;

/// What a workstream tells the REPL.
pub enum UiEvent {
    /// The engine asks for an approval decision (answered with `Op::Approve`).
    Approval {
        /// Workstream slot id.
        ws: u64,
        /// The request.
        request: ApproveRequest,
    },
    /// A workstream changed state (footer and prompt refresh).
    Changed,
    /// A job finished; `failed` when it ended in an error (not a cancel).
    Finished {
        /// Whether the job failed.
        failed: bool,
    },
}

#[derive(Default)]
struct Render {
    /// Background output waiting for the workstream to be foregrounded.
    buffer: Vec<String>,
    dropped: usize,
    reasoning: String,
    in_reasoning: bool,
    streamed: HashSet<String>,
    /// Partial tool-output line per call.
    chunk_tail: std::collections::HashMap<String, String>,
    status: Option<(u32, u32, u32)>,
    thinking: bool,
}

/// The terminal front end of one workstream: renders its session's events.
pub struct WsUi {
    id: u64,
    console: Arc<Console>,
    foreground: AtomicBool,
    md: Mutex<MarkdownStream>,
    render: Mutex<Render>,
    state: Mutex<SessionState>,
    events: mpsc::UnboundedSender<UiEvent>,
    markdown: bool,
}

/// ` at depth 2` for a sub-agent's sub-agent (nothing at depth 1).
fn depth_mark(depth: u32) -> String {
    if depth > 1 {
        format!(" at depth {depth}")
    } else {
        String::new()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl WsUi {
    /// A UI for slot `id`.
    pub fn new(id: u64, console: Arc<Console>, events: mpsc::UnboundedSender<UiEvent>) -> Self {
        let styling = if console.color() {
            Styling::Ansi
        } else {
            Styling::Plain
        };
        let markdown = console.renders_markdown();
        Self {
            id,
            console,
            foreground: AtomicBool::new(false),
            md: Mutex::new(MarkdownStream::new(styling)),
            render: Mutex::new(Render::default()),
            state: Mutex::new(SessionState::Idle),
            events,
            markdown,
        }
    }

    /// The session's current state.
    pub fn state(&self) -> SessionState {
        *lock(&self.state)
    }

    /// Whether the model is generating (the spinner is shown).
    pub fn thinking(&self) -> bool {
        lock(&self.render).thinking
    }

    /// Brings the workstream to the front (replaying buffered output) or sends it back.
    pub fn set_foreground(&self, fg: bool) {
        if fg {
            let (lines, dropped) = {
                let mut r = lock(&self.render);
                (
                    std::mem::take(&mut r.buffer),
                    std::mem::take(&mut r.dropped),
                )
            };
            if dropped > 0 {
                self.console.print(self.dim(&format!(
                    "… {dropped} earlier line(s) of background output were dropped"
                )));
            }
            self.console.print_lines(&lines);
            self.foreground.store(true, Ordering::SeqCst);
            self.console
                .set_spinner(self.thinking().then(|| "thinking…".to_string()));
        } else {
            self.foreground.store(false, Ordering::SeqCst);
        }
    }

    fn is_fg(&self) -> bool {
        self.foreground.load(Ordering::SeqCst)
    }

    /// Shows lines now, or keeps them for later.
    pub fn emit(&self, lines: Vec<String>) {
        if lines.is_empty() {
            return;
        }
        let mut r = lock(&self.render);
        if self.is_fg() {
            drop(r);
            self.console.print_lines(&lines);
        } else {
            r.buffer.extend(lines);
            if r.buffer.len() > BUFFER_MAX_LINES {
                let extra = r.buffer.len() - BUFFER_MAX_LINES;
                r.buffer.drain(..extra);
                r.dropped += extra;
            }
        }
    }

    fn dim(&self, s: &str) -> String {
        if self.console.color() {
            format!("\x1b[2m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    fn colored(&self, code: &str, s: &str) -> String {
        if self.console.color() {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    /// Renders an approval batch (also re-shown when the workstream is foregrounded).
    pub fn approval_lines(&self, items: &[ToolItem]) -> Vec<String> {
        let mut out = Vec::new();
        for it in items {
            let mark = if it.error.is_some() {
                self.colored("31", "✗")
            } else if it.needs_approval {
                self.colored("33", "?")
            } else {
                self.colored("32", "✓")
            };
            let from = it
                .agent
                .as_ref()
                .map(|a| self.dim(&format!("[sub-agent{}] ", depth_mark(a.depth))))
                .unwrap_or_default();
            out.push(format!("{mark} {from}{}", self.colored("1", &it.header)));
            if let Some(e) = &it.error {
                out.push(self.colored("31", &format!("  {e}")));
            }
            for v in [&it.heuristic_verdict, &it.judge_verdict]
                .into_iter()
                .flatten()
            {
                out.push(self.verdict_line(v));
            }
            if let Some(p) = &it.policy {
                out.push(self.dim(&format!("  policy: {p}")));
            }
            if it.needs_approval && !it.grants.is_empty() {
                out.push(self.dim(&format!("  may touch: {}", it.grants.join(" · "))));
            }
            if let Some(p) = &it.preview {
                for l in p.lines().take(200) {
                    out.push(format!("  {}", self.diff_line(l)));
                }
            }
        }
        out.push(self.dim(
            "approve? y = yes · n = no · a = always for this tool — add text after the letter to tell the model why",
        ));
        out
    }

    /// One verdict: risk, advice, confidence, tier, and why.
    fn verdict_line(&self, v: &turnstone_protocol::Verdict) -> String {
        let color = match v.risk_level.as_str() {
            "low" => "32",
            "medium" => "33",
            _ => "31",
        };
        let who = if v.tier == "llm" {
            "judge"
        } else {
            "heuristic"
        };
        let head = format!(
            "  {who}: {} risk · {} ({:.0}%)",
            v.risk_level,
            v.recommendation,
            v.confidence * 100.0
        );
        let why: String = v.reasoning.chars().take(160).collect();
        format!(
            "{} {}",
            self.colored(color, &head),
            self.dim(&format!("— {why}"))
        )
    }

    fn diff_line(&self, l: &str) -> String {
        if l.starts_with("+++") || l.starts_with("---") {
            self.colored("1", l)
        } else if l.starts_with('+') {
            self.colored("32", l)
        } else if l.starts_with('-') {
            self.colored("31", l)
        } else if l.starts_with("@@") {
            self.colored("36", l)
        } else {
            l.to_string()
        }
    }

    /// The status line after a turn (tokens / context window), once.
    pub fn take_status_line(&self) -> Option<String> {
        let (prompt, completion, window) = lock(&self.render).status.take()?;
        let pct = if window > 0 {
            f64::from(prompt + completion) * 100.0 / f64::from(window)
        } else {
            0.0
        };
        Some(self.dim(&format!(
            "[{prompt} prompt + {completion} completion tokens · context {pct:.1}% of {}k]",
            window / 1000
        )))
    }

    fn flush_reasoning(&self, r: &mut Render) -> Vec<String> {
        let text = std::mem::take(&mut r.reasoning);
        text.lines()
            .map(|l| {
                if self.console.color() {
                    format!("\x1b[2;3m{l}\x1b[0m")
                } else {
                    format!("(thinking) {l}")
                }
            })
            .collect()
    }

    fn stop_spinner(&self) {
        let mut r = lock(&self.render);
        if r.thinking {
            r.thinking = false;
            drop(r);
            if self.is_fg() {
                self.console.set_spinner(None);
            }
        }
    }
}

impl WsUi {
    /// Renders one event of this workstream's session. Called on the session's
    /// task as events happen, so a turn's `Finished` reaches the REPL before
    /// the session is released.
    pub fn handle(&self, e: SessionEvent) {
        match e {
            SessionEvent::Wire(event) => match event {
                Event::ThinkingStart => self.on_thinking_start(),
                Event::ThinkingStop => self.stop_spinner(),
                Event::Reasoning(t) => self.on_reasoning_token(&t.text),
                Event::Content(t) => self.on_content_token(&t.text),
                Event::StreamEnd => self.on_stream_end(),
                Event::ApproveRequest(request) => {
                    // The REPL shows the card: now if this workstream is in
                    // front, else when the user switches to it.
                    let _ = self.events.send(UiEvent::Approval {
                        ws: self.id,
                        request,
                    });
                }
                Event::ToolOutputChunk(c) => self.on_tool_output_chunk(&c.call_id, &c.chunk),
                Event::ToolResult(r) => {
                    self.on_tool_result(&r.call_id, &r.name, &r.output, r.is_error);
                    if let Some(caps) = r.capabilities.as_deref().filter(|c| !c.is_empty()) {
                        let out = caps
                            .lines()
                            .into_iter()
                            .map(|l| self.dim(&format!("  ↳ {l}")))
                            .collect();
                        self.emit(out);
                    }
                }
                Event::IntentVerdict(v) => {
                    let line = format!("{} ({})", self.verdict_line(&v), v.func_name);
                    self.emit(vec![line]);
                }
                Event::OutputWarning(w) => {
                    let line = format!(
                        "⚠ {}: {}{}",
                        w.func_name,
                        w.flags.join(", "),
                        if w.redacted {
                            " — redacted before the model saw it"
                        } else {
                            ""
                        }
                    );
                    self.emit(vec![self.colored("33", &line)]);
                }
                Event::Status(st) => {
                    lock(&self.render).status =
                        Some((st.prompt_tokens, st.completion_tokens, st.context_window));
                }
                Event::Info(m) => self.on_info(&m.message),
                Event::Error(m) => self.on_error(&m.message),
                Event::StateChange(sc) => self.on_state_change(sc.state),
                Event::SystemTurn(t) => {
                    let mut lines = t.content.lines();
                    let first = lines.next().unwrap_or("");
                    let mut out = vec![self.colored("36", &format!("◆ {}: {first}", t.source))];
                    out.extend(
                        lines
                            .take(RESULT_PREVIEW_LINES)
                            .map(|l| self.dim(&format!("  {l}"))),
                    );
                    self.emit(out);
                }
                Event::Preview(p) => {
                    let line = format!("◆ preview ({}): {} → {}", p.kind, p.title, p.url);
                    let out = vec![self.colored("36", &line)];
                    self.emit(out);
                }
                Event::AgentEvent(a) => {
                    let lines = self.agent_lines(&a, 1);
                    self.emit(lines);
                }
                _ => {}
            },
            SessionEvent::TurnEnded(outcome) => {
                // Counted before the session is released: piped mode stops at
                // end of input as soon as no slot is busy, and must not miss it.
                let _ = self.events.send(UiEvent::Finished {
                    failed: outcome.failed(),
                });
                if let Some(status) = self.take_status_line() {
                    self.emit(vec![status]);
                }
            }
        }
    }

    /// A sub-agent's event as indented lines under its `task_agent` call
    /// (its reply text line by line, its tools' headers and results).
    fn agent_lines(&self, a: &turnstone_protocol::AgentEvent, level: usize) -> Vec<String> {
        let bar = "  ┆ ".repeat(level);
        let line = |text: &str| self.dim(&format!("{bar}{text}"));
        match &*a.event {
            Event::AgentEvent(inner) => self.agent_lines(inner, level + 1),
            Event::Content(t) => {
                let key = format!("agent:{}", a.origin.agent_ws_id);
                let mut r = lock(&self.render);
                let tail = r.chunk_tail.entry(key).or_default();
                tail.push_str(&t.text);
                let Some(nl) = tail.rfind('\n') else {
                    return Vec::new();
                };
                let rest = tail.split_off(nl + 1);
                let done = std::mem::replace(tail, rest);
                done.lines().map(line).collect()
            }
            Event::StreamEnd => {
                let key = format!("agent:{}", a.origin.agent_ws_id);
                let tail = lock(&self.render).chunk_tail.remove(&key);
                tail.filter(|t| !t.trim().is_empty())
                    .map(|t| vec![line(&t)])
                    .unwrap_or_default()
            }
            Event::ToolInfo(items) => items
                .items
                .iter()
                .map(|i| line(&format!("⚙ {}", i.header)))
                .collect(),
            Event::ToolResult(r) if r.is_error => {
                vec![line(&format!(
                    "✗ {}: {}",
                    r.name,
                    r.output.lines().next().unwrap_or("")
                ))]
            }
            Event::ToolResult(r) => vec![line(&format!("✓ {}", r.name))],
            Event::Info(m) => vec![line(&format!("· {}", m.message))],
            Event::Error(m) => vec![self.colored("31", &format!("{bar}error: {}", m.message))],
            _ => Vec::new(),
        }
    }

    fn on_thinking_start(&self) {
        lock(&self.render).thinking = true;
        if self.is_fg() {
            self.console.set_spinner(Some("thinking…".into()));
        }
    }

    fn on_reasoning_token(&self, text: &str) {
        let mut r = lock(&self.render);
        r.in_reasoning = true;
        r.reasoning.push_str(text);
        if let Some(nl) = r.reasoning.rfind('\n') {
            let rest = r.reasoning.split_off(nl + 1);
            let lines = self.flush_reasoning(&mut r);
            r.reasoning = rest;
            drop(r);
            self.emit(lines);
        }
    }

    fn on_content_token(&self, text: &str) {
        self.stop_spinner();
        let mut lines = Vec::new();
        {
            let mut r = lock(&self.render);
            if r.in_reasoning {
                r.in_reasoning = false;
                lines.extend(self.flush_reasoning(&mut r));
            }
        }
        if self.markdown {
            lines.extend(lock(&self.md).push(text));
        } else {
            // Not a terminal: raw text, still line by line.
            let mut md = lock(&self.md);
            lines.extend(md.push_raw(text));
        }
        self.emit(lines);
    }

    fn on_stream_end(&self) {
        self.stop_spinner();
        let mut lines = {
            let mut r = lock(&self.render);
            r.in_reasoning = false;
            self.flush_reasoning(&mut r)
        };
        let mut md = lock(&self.md);
        lines.extend(if self.markdown {
            md.finish()
        } else {
            md.finish_raw()
        });
        drop(md);
        self.emit(lines);
    }

    fn on_tool_output_chunk(&self, call_id: &str, chunk: &str) {
        let lines = {
            let mut r = lock(&self.render);
            r.streamed.insert(call_id.to_string());
            let tail = r.chunk_tail.entry(call_id.to_string()).or_default();
            tail.push_str(chunk);
            let Some(nl) = tail.rfind('\n') else {
                return;
            };
            let rest = tail.split_off(nl + 1);
            let done = std::mem::replace(tail, rest);
            done.lines()
                .map(|l| self.dim(&format!("  │ {l}")))
                .collect::<Vec<_>>()
        };
        self.emit(lines);
    }

    fn on_tool_result(&self, call_id: &str, name: &str, output: &str, is_error: bool) {
        let (streamed, tail) = {
            let mut r = lock(&self.render);
            (
                r.streamed.remove(call_id),
                r.chunk_tail.remove(call_id).unwrap_or_default(),
            )
        };
        let mut lines = Vec::new();
        if !tail.is_empty() {
            lines.push(self.dim(&format!("  │ {tail}")));
        }
        if is_error {
            let first = output.lines().next().unwrap_or("");
            lines.push(self.colored("31", &format!("✗ {name}: {first}")));
        } else {
            lines.push(self.colored("32", &format!("✓ {name}")));
            if !streamed {
                let all: Vec<&str> = output.lines().collect();
                for l in all.iter().take(RESULT_PREVIEW_LINES) {
                    lines.push(self.dim(&format!("  │ {l}")));
                }
                if all.len() > RESULT_PREVIEW_LINES {
                    lines.push(self.dim(&format!(
                        "  │ … {} more line(s)",
                        all.len() - RESULT_PREVIEW_LINES
                    )));
                }
            }
        }
        self.emit(lines);
    }

    fn on_info(&self, message: &str) {
        self.emit(vec![self.dim(&format!("· {message}"))]);
    }

    /// Shows an error line (also for failures the engine does not report,
    /// such as a refused `/compact`).
    pub fn on_error(&self, message: &str) {
        let line = self.colored("31", &format!("error: {message}"));
        if self.console.interactive() {
            self.emit(vec![line]);
        } else {
            self.console.print_errors(&[line]);
        }
    }

    fn on_state_change(&self, state: SessionState) {
        *lock(&self.state) = state;
        let _ = self.events.send(UiEvent::Changed);
    }
}
