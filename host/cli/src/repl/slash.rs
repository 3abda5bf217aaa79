//! What each slash command does.

use super::Repl;
use super::commands::{Command, HELP};
use super::workstreams::sink_for;
use turnstone_engine::runner::Ack;
use turnstone_protocol::Op;
use turnstone_storage::prelude::*;

impl Repl {
    /// Refuses commands that need an idle workstream; true when busy.
    fn refuse_if_busy(&self, what: &str) -> bool {
        let busy = self.slots[self.fg].busy();
        if busy {
            self.error(&format!(
                "{what} needs this workstream to be idle — wait for the turn or press Ctrl-C"
            ));
        }
        busy
    }

    pub(super) async fn command(&mut self, cmd: Command) {
        match cmd {
            Command::Help => {
                let lines: Vec<String> = HELP.lines().map(String::from).collect();
                self.console.print_lines(&lines);
            }
            Command::Exit => self.exit = true,
            Command::Skill(arg) => self.skill_command(&arg).await,
            Command::Memory(m) => self.memory_command(m).await,
            Command::Watches { all } => self.watches_command(all).await,
            Command::WatchCancel(name) => self.cancel_watch_command(&name).await,
            Command::Agents => self.agents_command().await,
            Command::Clear => {
                if !self.refuse_if_busy("/clear") {
                    match self.slots[self.fg].submit(Op::Clear).await {
                        Ok(_) => self.info(
                            "context cleared (the history stays saved; /resume brings it back)",
                        ),
                        Err(e) => self.error(&e.to_string()),
                    }
                }
            }
            Command::New => {
                if self.refuse_if_busy("/new") {
                    return;
                }
                let name = self.slots[self.fg].name.clone();
                let old = self.slots[self.fg].ws_id.clone();
                let sink = sink_for(&self.slots[self.fg].ui);
                let made = async {
                    let ws_id = self.app.create_workstream(&name).await?;
                    self.app.session(&ws_id, sink, false).await
                }
                .await;
                match made {
                    Ok(session) => {
                        let fg = self.fg;
                        self.slots[fg].replace(session, name).await;
                        self.info(&format!(
                            "new workstream {} (the previous one, {old}, stays resumable)",
                            self.slots[fg].ws_id
                        ));
                    }
                    Err(e) => self.error(&format!("{e:#}")),
                }
            }
            Command::Resume(q) => self.resume(&q).await,
            Command::Name(alias) => {
                let ws_id = self.slots[self.fg].ws_id.clone();
                match self.app.storage.set_alias(&ws_id, Some(&alias)).await {
                    Ok(()) => {
                        self.slots[self.fg].name = alias.clone();
                        self.info(&format!(
                            "named {alias} — `turnstone --resume {alias}` continues it"
                        ));
                    }
                    Err(e) => self.error(&e.to_string()),
                }
            }
            Command::History(query) => self.history(query.as_deref()).await,
            Command::Compact => {
                if !self.refuse_if_busy("/compact") {
                    self.slots[self.fg].submit_in_background(Op::Compact);
                }
            }
            Command::Retry => {
                if !self.refuse_if_busy("/retry")
                    && let Err(e) = self.slots[self.fg].submit(Op::Retry).await
                {
                    self.error(&e.to_string());
                }
            }
            Command::Rewind(n) => {
                if self.refuse_if_busy("/rewind") {
                    return;
                }
                match self.slots[self.fg].submit(Op::Rewind { turns: n }).await {
                    Ok(Ack::Rewound { text }) => self.info(&format!(
                        "rewound {n} message(s); the earliest removed was: {}",
                        one_line(&text, 80)
                    )),
                    Ok(_) => {}
                    Err(e) => self.error(&e.to_string()),
                }
            }
            Command::Model(None) => {
                let reg = self.app.models.snapshot();
                let mut lines = vec!["Model aliases (* = default):".to_string()];
                for a in reg.aliases() {
                    let mark = if a.name == reg.default { "*" } else { " " };
                    lines.push(format!(
                        " {mark} {:<16} {} · {} · {}",
                        a.name, a.config.model, a.provider, a.base_url
                    ));
                }
                self.console.print_lines(&lines);
            }
            Command::Model(Some(alias)) => {
                if self.refuse_if_busy("/model") {
                    return;
                }
                let op = Op::SetModel {
                    alias: alias.clone(),
                };
                match self.slots[self.fg].submit(op).await {
                    Ok(Ack::ModelSet { model }) => {
                        self.info(&format!("this workstream now uses {alias} ({model})"))
                    }
                    Ok(_) => {}
                    Err(e) => self.error(&e.to_string()),
                }
            }
            Command::Plugins => {
                let mut buf = Vec::new();
                match crate::plugins_cmd::list(
                    &self.app.loaded.registry(),
                    &self.app.loaded.mcp,
                    false,
                    &mut buf,
                ) {
                    Ok(()) => {
                        let text = String::from_utf8_lossy(&buf);
                        let lines: Vec<String> = text.lines().map(String::from).collect();
                        self.console.print_lines(&lines);
                    }
                    Err(e) => self.error(&e.to_string()),
                }
            }
            Command::Mcp => {
                let mut buf = Vec::new();
                match crate::mcp_cli::describe(&self.app.loaded.mcp, &mut buf) {
                    Ok(()) => {
                        let text = String::from_utf8_lossy(&buf);
                        let lines: Vec<String> = text.lines().map(String::from).collect();
                        self.console.print_lines(&lines);
                    }
                    Err(e) => self.error(&e.to_string()),
                }
            }
            Command::McpRefresh(server) => {
                let hub = &self.app.loaded.mcp;
                let names: Vec<String> = match server {
                    Some(s) => vec![s],
                    None => hub.servers().iter().map(|s| s.name.clone()).collect(),
                };
                if names.is_empty() {
                    self.info("No MCP servers are configured.");
                }
                for name in names {
                    if hub.reload(&name) {
                        self.info(&format!("MCP server {name}: reconnecting"));
                    } else {
                        self.error(&format!("no MCP server named {name:?} (see /mcp)"));
                    }
                }
            }
            Command::WsList => {
                let lines: Vec<String> = self
                    .slots
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        format!(
                            "{} {}. {:<20} {:<9} {}",
                            if i == self.fg { "*" } else { " " },
                            i + 1,
                            s.name,
                            s.state_label(),
                            s.ws_id
                        )
                    })
                    .collect();
                self.console.print_lines(&lines);
            }
            Command::WsNew(name) => {
                let name = name.unwrap_or_else(|| (self.slots.len() + 1).to_string());
                match self.open_slot(name, None).await {
                    Ok(i) => self.switch_to(i),
                    Err(e) => self.error(&format!("{e:#}")),
                }
            }
            Command::WsSwitch(n) => {
                if n > self.slots.len() {
                    self.error(&format!(
                        "there is no workstream {n} (there are {}; see /ws list)",
                        self.slots.len()
                    ));
                } else {
                    self.switch_to(n - 1);
                }
            }
            Command::WsClose(n) => {
                let i = n.map(|n| n - 1).unwrap_or(self.fg);
                if i >= self.slots.len() {
                    self.error(&format!("there is no workstream {}", i + 1));
                } else if self.slots.len() == 1 {
                    self.error("this is the last workstream; /exit quits");
                } else {
                    if i == self.fg {
                        self.switch_to(if i == 0 { 1 } else { i - 1 });
                    }
                    let mut slot = self.slots.remove(i);
                    if self.fg > i {
                        self.fg -= 1;
                    }
                    slot.cancel();
                    self.info(&format!(
                        "closed workstream {} ({}); it stays resumable as {}",
                        i + 1,
                        slot.name,
                        slot.ws_id
                    ));
                }
            }
            Command::WsRename(name) => {
                let ws_id = self.slots[self.fg].ws_id.clone();
                match self.app.storage.set_title(&ws_id, Some(&name)).await {
                    Ok(()) => {
                        self.slots[self.fg].name = name.clone();
                        self.info(&format!("renamed to {name}"));
                    }
                    Err(e) => self.error(&e.to_string()),
                }
            }
        }
    }

    async fn resume(&mut self, query: &str) {
        if self.refuse_if_busy("/resume") {
            return;
        }
        if let Ok(ws) = self.app.storage.resolve_workstream(query).await
            && let Some(i) = self.slots.iter().position(|s| s.ws_id == ws.ws_id)
        {
            self.info(&format!("{query} is already open as workstream {}", i + 1));
            self.switch_to(i);
            return;
        }
        let ui = self.slots[self.fg].ui.clone();
        match self.resumed_session(query, &ui).await {
            Ok((session, name)) => {
                let fg = self.fg;
                self.slots[fg].replace(session, name).await;
            }
            Err(e) => self.error(&format!("{e:#}")),
        }
    }

    async fn history(&self, query: Option<&str>) {
        let db = &self.app.storage;
        let lines: Result<Vec<String>, StorageError> = match query {
            None => db
                .list_workstreams_with_history(None, 20, 0)
                .await
                .map(|list| {
                    let mut out =
                        vec!["Saved workstreams (newest first; /resume <alias or id>):".into()];
                    out.extend(list.into_iter().map(|s| {
                        let w = s.workstream;
                        let label = w
                            .alias
                            .clone()
                            .unwrap_or_else(|| w.ws_id.chars().take(12).collect());
                        let title = w.title.clone().unwrap_or(w.name.clone());
                        format!(
                            "  {label:<14} {:<28} {:>4} msg  {}",
                            one_line(&title, 28),
                            s.message_count,
                            s.last_activity
                        )
                    }));
                    out
                }),
            Some(q) => db
                .search_history(
                    q,
                    &SearchFilter {
                        limit: Some(20),
                        ..Default::default()
                    },
                )
                .await
                .map(|hits| {
                    let mut out = vec![format!("{} match(es) for {q:?}:", hits.len())];
                    out.extend(hits.into_iter().map(|h| {
                        format!(
                            "  {} {:<9} {}",
                            h.ws_id.chars().take(12).collect::<String>(),
                            h.role.as_str(),
                            one_line(&h.message, 90)
                        )
                    }));
                    out
                }),
        };
        match lines {
            Ok(l) => self.console.print_lines(&l),
            Err(e) => self.error(&e.to_string()),
        }
    }
}

/// The first line of `s`, cut to `max` characters.
fn one_line(s: &str, max: usize) -> String {
    let first = s.lines().next().unwrap_or("");
    if first.chars().count() > max {
        format!("{}…", first.chars().take(max - 1).collect::<String>())
    } else {
        first.to_string()
    }
}
