//! The interactive terminal (and its scriptable piped-stdin mode).

mod agent_cmds;
pub mod commands;
pub mod console;
mod slash;
pub mod ui;
mod watches;
pub mod workstreams;

use crate::app::App;
use anyhow::Result;
use console::{Console, InputEvent, RawModeGuard};
use futures::StreamExt;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;
use turnstone_engine::runner::Ack;
use turnstone_protocol::{Decision, Op};
use ui::{UiEvent, WsUi};
use workstreams::Slot;

/// Spinner frame interval.
const TICK: Duration = Duration::from_millis(80);
/// How long exit waits for cancelled turns to record their outcome.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// The REPL's state.
pub struct Repl {
    app: Arc<App>,
    console: Arc<Console>,
    slots: Vec<Slot>,
    fg: usize,
    next_id: u64,
    events: mpsc::UnboundedSender<UiEvent>,
    /// A Ctrl-C at the idle prompt was seen; the next one exits.
    interrupt_armed: bool,
    exit: bool,
    /// Jobs that ended in an error (piped mode exits non-zero when any did).
    failures: usize,
}

/// Runs the REPL until `/exit`, Ctrl-D, or (piped) end of input. Returns
/// whether every turn succeeded (piped mode turns a failure into exit code 1).
pub async fn run(
    app: App,
    resume: Option<String>,
    skill: Option<String>,
    started: std::time::Instant,
) -> Result<bool> {
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let console = Arc::new(Console::detect(interactive));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut repl = Repl {
        app: Arc::new(app),
        console: console.clone(),
        slots: Vec::new(),
        fg: 0,
        next_id: 1,
        events: tx,
        interrupt_armed: false,
        exit: false,
        failures: 0,
    };
    // Raw mode before the first prompt is drawn: keys typed at once must
    // reach the line editor, not the terminal's cooked line buffer.
    let _raw = if interactive {
        Some(RawModeGuard::enable()?)
    } else {
        None
    };
    // Watches of the open workstreams are polled while the terminal runs.
    let watch_stop = tokio_util::sync::CancellationToken::new();
    let _stop_watches = watch_stop.clone().drop_guard();
    turnstone_engine::watch::WatchScheduler::new(
        repl.app.storage.clone(),
        format!("cli-{}", std::process::id()),
        repl.app.loaded.live.clone().into(),
        repl.app.loaded.workspace.clone(),
        watches::OpenDelivery::new(repl.app.open.clone()),
        repl.app.watch_wake.clone(),
    )
    .spawn(watch_stop);
    // The window shown is the one sessions use (asked of a self-hosted
    // server once, bounded; the answer is kept for the alias).
    let window = repl.app.resolve_window().await;
    repl.banner(started, window);
    repl.open_slot("main".into(), resume.as_deref()).await?;
    if let Some(skill) = skill {
        // `--skill` that cannot apply stops here rather than chatting without it.
        repl.use_skill(&skill)
            .await
            .map_err(|e| anyhow::anyhow!("--skill: {e}"))?;
    }
    repl.slots[0].ui.set_foreground(true);
    repl.refresh_prompt();
    let mut keys = interactive.then(crossterm::event::EventStream::new);
    let mut lines = (!interactive).then(|| tokio::io::BufReader::new(tokio::io::stdin()).lines());
    let mut eof = false;
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);

    while !repl.exit {
        if eof && !repl.slots.iter().any(Slot::busy) {
            break;
        }
        let fg_waits = repl.slots[repl.fg].approval.is_some();
        let want_line = !eof && (!repl.slots[repl.fg].busy() || fg_waits);
        tokio::select! {
            Some(ev) = rx.recv() => repl.on_event(ev),
            Some(ev) = async { keys.as_mut()?.next().await }, if keys.is_some() => {
                match ev {
                    Ok(crossterm::event::Event::Key(k)) => {
                        if let Some(input) = console.key(k) {
                            repl.on_input(input).await;
                        }
                    }
                    Ok(crossterm::event::Event::Paste(text)) => console.paste(&text),
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!("terminal input failed: {e}");
                        repl.exit = true;
                    }
                }
            }
            line = async { lines.as_mut()?.next_line().await.ok().flatten() }, if lines.is_some() && want_line => {
                match line {
                    Some(l) => repl.on_input(InputEvent::Line(l)).await,
                    None => {
                        eof = true;
                        let fg = repl.fg;
                        if repl.slots[fg].approval.is_some() {
                            repl.console.print("· end of input: the pending tool call was denied");
                            let _ = repl.slots[fg].answer(Decision::deny()).await;
                        }
                    }
                }
            }
            _ = sigint.recv() => repl.on_input(InputEvent::Interrupt).await,
            _ = tick.tick() => { console.tick(); }
        }
    }
    repl.shutdown(&mut rx).await;
    // A turn's `Finished` is sent before its slot goes idle, so it is in the
    // channel even when the loop stopped at the idle slot without reading it.
    while let Ok(ev) = rx.try_recv() {
        if let UiEvent::Finished { failed } = ev {
            repl.failures += usize::from(failed);
        }
    }
    console.teardown();
    Ok(interactive || repl.failures == 0)
}

impl Repl {
    fn banner(&self, started: std::time::Instant, window: Option<u32>) {
        let app = &self.app;
        let mut lines = vec![
            format!(
                "turnstone {} · model {}",
                env!("CARGO_PKG_VERSION"),
                app.model_line(window)
            ),
            format!(
                "workspace {} · {} plugin(s), {} tool(s) loaded in {} ms",
                app.loaded.workspace.display(),
                app.loaded.registry().loaded().count(),
                app.loaded.registry().tools().count(),
                started.elapsed().as_millis()
            ),
        ];
        lines.extend(app.housekeeping.iter().map(|h| format!("· {h}")));
        for f in app.failed_plugins() {
            lines.push(format!("· plugin failed to load — {f}"));
        }
        if self.console.interactive() {
            lines.push("Type /help for commands. Ctrl-C cancels a turn; Ctrl-D exits.".into());
            let dim: Vec<String> = lines.into_iter().map(|l| self.dim(&l)).collect();
            self.console.print_lines(&dim);
        } else {
            for l in lines {
                eprintln!("{l}");
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

    fn info(&self, s: &str) {
        self.console.print(self.dim(&format!("· {s}")));
    }

    fn error(&self, s: &str) {
        self.console.print(if self.console.color() {
            format!("\x1b[31merror: {s}\x1b[0m")
        } else {
            format!("error: {s}")
        });
    }

    /// Opens a workstream slot (new, or resumed from storage) at the end.
    async fn open_slot(&mut self, name: String, resume: Option<&str>) -> Result<usize> {
        let id = self.next_id;
        self.next_id += 1;
        let ui = Arc::new(WsUi::new(id, self.console.clone(), self.events.clone()));
        let (session, name) = match resume {
            Some(q) => self.resumed_session(q, &ui).await?,
            None => {
                let ws_id = self.app.create_workstream(&name).await?;
                let sink = workstreams::sink_for(&ui);
                (self.app.session(&ws_id, sink, false).await?, name)
            }
        };
        self.slots
            .push(Slot::spawn(id, name, session, ui, self.app.open.clone()));
        Ok(self.slots.len() - 1)
    }

    /// A session on a saved workstream, with its display name; prints a recap.
    async fn resumed_session(
        &self,
        query: &str,
        ui: &Arc<WsUi>,
    ) -> Result<(turnstone_engine::session::ChatSession, String)> {
        let ws = self.app.storage.resolve_workstream(query).await?;
        let sink = workstreams::sink_for(ui);
        let session = self.app.session(&ws.ws_id, sink, true).await?;
        let name = ws
            .alias
            .clone()
            .or(ws.title.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| {
                if ws.name.is_empty() {
                    ws.ws_id.chars().take(8).collect()
                } else {
                    ws.name.clone()
                }
            });
        let turns = session.turns();
        let mut recap = vec![self.dim(&format!(
            "· resumed {name} ({}) — {} message(s)",
            &ws.ws_id,
            turns.len()
        ))];
        let last_user = turns
            .iter()
            .rposition(|t| t.role == turnstone_engine::Role::User);
        if let Some(i) = last_user {
            recap.push(self.dim(&format!("› {}", turns[i].text_content())));
            if let Some(reply) = turns[i..]
                .iter()
                .rev()
                .find(|t| t.role == turnstone_engine::Role::Assistant)
            {
                let mut md = crate::markdown::MarkdownStream::new(if self.console.color() {
                    crate::markdown::Styling::Ansi
                } else {
                    crate::markdown::Styling::Plain
                });
                recap.extend(md.push(&reply.text_content()));
                recap.extend(md.finish());
            }
        }
        ui.emit(recap);
        Ok((session, name))
    }

    fn prompt_for(&self, i: usize) -> String {
        let s = &self.slots[i];
        if s.approval.is_some() {
            format!("{} approve [y/n/a] › ", s.name)
        } else {
            format!("{} › ", s.name)
        }
    }

    fn refresh_prompt(&self) {
        self.console.set_prompt(&self.prompt_for(self.fg));
        let bg: Vec<String> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(i, s)| *i != self.fg && (s.busy() || s.approval.is_some()))
            .map(|(i, s)| format!("{}:{} {}", i + 1, s.name, s.state_label()))
            .collect();
        self.console
            .set_status((!bg.is_empty()).then(|| format!("bg: {}", bg.join(" · "))));
    }

    fn slot_index(&self, id: u64) -> Option<usize> {
        self.slots.iter().position(|s| s.id == id)
    }

    fn on_event(&mut self, ev: UiEvent) {
        match ev {
            UiEvent::Approval { ws, request } => {
                let Some(i) = self.slot_index(ws) else {
                    return;
                };
                let slot = &mut self.slots[i];
                if i == self.fg {
                    slot.ui.emit(slot.ui.approval_lines(&request.items));
                }
                slot.approval = Some(request);
                if i != self.fg {
                    self.console.bell();
                    self.info(&format!(
                        "workstream {} ({}) needs approval — /ws {} to review",
                        i + 1,
                        self.slots[i].name,
                        i + 1
                    ));
                }
            }
            UiEvent::Changed => {}
            UiEvent::Finished { failed } => self.failures += usize::from(failed),
        }
        self.refresh_prompt();
    }

    async fn on_input(&mut self, input: InputEvent) {
        match input {
            InputEvent::Interrupt => {
                let fg = &mut self.slots[self.fg];
                if fg.busy() {
                    fg.cancel();
                    self.interrupt_armed = false;
                    self.info("cancelling…");
                } else if self.interrupt_armed {
                    self.exit = true;
                } else {
                    self.interrupt_armed = true;
                    self.info("press Ctrl-C again to exit (or /exit)");
                }
            }
            InputEvent::Eof => self.exit = true,
            InputEvent::Line(line) => {
                self.interrupt_armed = false;
                self.on_line(line).await;
            }
        }
        self.refresh_prompt();
    }

    async fn on_line(&mut self, line: String) {
        if self.slots[self.fg].approval.is_some() {
            match parse_approval(&line) {
                Some(answer) => {
                    let fg = self.fg;
                    if let Err(e) = self.slots[fg].answer(answer).await {
                        self.error(&e.to_string());
                    }
                }
                None => {
                    self.info("answer y, n or a (optionally followed by a note for the model)");
                }
            }
            return;
        }
        match commands::parse(&line) {
            Ok(Some(cmd)) => self.command(cmd).await,
            Ok(None) => self.message(line).await,
            Err(e) => self.error(&e),
        }
    }

    async fn message(&mut self, line: String) {
        let text = match line.strip_prefix("//") {
            Some(rest) => format!("/{rest}"),
            None => line,
        };
        if text.trim().is_empty() {
            return;
        }
        let op = Op::Send {
            text,
            parts: Vec::new(),
            client_send_id: None,
            sender: None,
            attachments: Vec::new(),
        };
        match self.slots[self.fg].submit(op).await {
            Ok(Ack::Queued { .. }) => {
                self.info("queued — it joins the conversation at the next tool result")
            }
            Ok(Ack::QueueFull) => self.error(&turnstone_engine::session::QueueFull.to_string()),
            Ok(_) => {}
            Err(e) => self.error(&e.to_string()),
        }
    }

    fn switch_to(&mut self, i: usize) {
        if i == self.fg {
            return;
        }
        self.slots[self.fg].ui.set_foreground(false);
        self.console.set_spinner(None);
        self.fg = i;
        let s = &self.slots[i];
        self.console.print(self.dim(&format!(
            "── workstream {} · {} · {} ──",
            i + 1,
            s.name,
            s.state_label()
        )));
        s.ui.set_foreground(true);
        if let Some(p) = &s.approval {
            s.ui.emit(s.ui.approval_lines(&p.items));
        }
    }

    async fn shutdown(&mut self, rx: &mut mpsc::UnboundedReceiver<UiEvent>) {
        for s in &mut self.slots {
            if s.busy() {
                s.cancel();
            }
        }
        // A cancelled turn denies its approval and records what ran; the
        // sessions then save and stop.
        let deadline = tokio::time::Instant::now() + EXIT_GRACE;
        while self.slots.iter().any(Slot::busy) {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(UiEvent::Finished { failed })) => self.failures += usize::from(failed),
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        for s in &self.slots {
            s.close(EXIT_GRACE).await;
        }
    }
}

/// `y`/`yes`, `n`/`no`, `a`/`always`, each optionally followed by feedback;
/// any other text denies with that text as feedback. `None` for a blank line.
pub fn parse_approval(line: &str) -> Option<Decision> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let (word, rest) = match line.split_once(|c: char| c.is_whitespace() || c == ',') {
        Some((w, r)) => (w, r.trim_start_matches([',', ' ']).trim()),
        None => (line, ""),
    };
    let feedback = (!rest.is_empty()).then(|| rest.to_string());
    Some(match word.to_ascii_lowercase().as_str() {
        "y" | "yes" => Decision {
            approved: true,
            always: false,
            feedback,
        },
        "a" | "always" => Decision {
            approved: true,
            always: true,
            feedback,
        },
        "n" | "no" => Decision {
            approved: false,
            always: false,
            feedback,
        },
        _ => Decision {
            approved: false,
            always: false,
            feedback: Some(line.to_string()),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_answers_with_and_without_feedback() {
        let a = parse_approval("y").unwrap();
        assert!(a.approved && !a.always && a.feedback.is_none());
        let a = parse_approval("A").unwrap();
        assert!(a.approved && a.always);
        let a = parse_approval("n, use rg instead").unwrap();
        assert!(!a.approved);
        assert_eq!(a.feedback.as_deref(), Some("use rg instead"));
        let a = parse_approval("yes but be careful").unwrap();
        assert!(a.approved);
        assert_eq!(a.feedback.as_deref(), Some("but be careful"));
        let a = parse_approval("please don't").unwrap();
        assert!(!a.approved);
        assert_eq!(a.feedback.as_deref(), Some("please don't"));
        assert!(parse_approval("   ").is_none());
    }
}
