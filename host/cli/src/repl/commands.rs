//! Slash commands: parsing and help text.

/// A parsed slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `/help`.
    Help,
    /// `/clear`.
    Clear,
    /// `/new`.
    New,
    /// `/resume <alias|id|prefix>`.
    Resume(String),
    /// `/name <alias>`.
    Name(String),
    /// `/history [query]`.
    History(Option<String>),
    /// `/compact`.
    Compact,
    /// `/retry`.
    Retry,
    /// `/rewind [N]`.
    Rewind(usize),
    /// `/model [alias]`.
    Model(Option<String>),
    /// `/plugins`.
    Plugins,
    /// `/mcp`.
    Mcp,
    /// `/mcp refresh [server]`: reconnect and list again.
    McpRefresh(Option<String>),
    /// `/skill [off | NAME [ARGS]]` (the text after `/skill`).
    Skill(String),
    /// `/memory [search Q | show NAME | forget NAME [SCOPE]]`.
    Memory(MemoryCommand),
    /// `/watches [all]`: this workstream's watches.
    Watches { all: bool },
    /// `/watches cancel NAME`.
    WatchCancel(String),
    /// `/agents`: the sub-agents this workstream started.
    Agents,
    /// `/exit`.
    Exit,
    /// `/ws list`.
    WsList,
    /// `/ws new [name]`.
    WsNew(Option<String>),
    /// `/ws <N>`.
    WsSwitch(usize),
    /// `/ws close [N]`.
    WsClose(Option<usize>),
    /// `/ws rename <name>`.
    WsRename(String),
}

/// What `/memory` asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryCommand {
    /// List what this workstream may see.
    List,
    /// Search by words.
    Search(String),
    /// One memory in full.
    Show(String),
    /// Delete one (the scope picks among same-named memories).
    Forget(String, Option<String>),
}

/// The `/help` text.
pub const HELP: &str = "\
Commands:
  /help                 this help
  /clear                forget the conversation context (history stays saved)
  /new                  start a fresh workstream in this slot (the old one stays resumable)
  /resume <x>           continue a saved workstream by alias, id or id prefix
  /name <alias>         give this workstream an alias (named ones are never pruned)
  /history [query]      list saved workstreams, or search their messages
  /compact              summarize the conversation now to free context
  /retry                ask the model again for the last message
  /rewind [N]           drop the last N messages (default 1) and their answers
  /model [alias]        list model aliases, or switch this workstream to one
  /plugins              loaded plugins with state and capabilities
  /mcp                  MCP servers, their state, tools, resources and prompts
  /mcp refresh [server] reconnect MCP servers and list them again
  /skill                list skills (the active one is marked)
  /skill NAME [ARGS]    activate a skill (ARGS: key=value or positional)
  /skill off            drop the active skill
  /memory               memories this workstream can see
  /memory search <q>    search them
  /memory show <name>   one memory in full
  /memory forget <name> [scope]  delete one
  /watches [all]        this workstream's active watches (all: ended ones too)
  /watches cancel <x>   cancel a watch by name or id prefix
  /agents               sub-agents this workstream started, with their transcripts' ids
  /ws list              workstreams in this terminal
  /ws new [name]        open a workstream and switch to it
  /ws <N>               switch to workstream N (background ones keep running)
  /ws close [N]         close a workstream (default: this one)
  /ws rename <name>     rename this workstream
  /exit                 quit (also Ctrl-D, or Ctrl-C twice at an empty prompt)
Typing while a turn runs queues the message; it joins at the next tool result.
Ctrl-C cancels the running turn.";

/// Parses `line`; `Ok(None)` when it is not a slash command.
pub fn parse(line: &str) -> Result<Option<Command>, String> {
    let line = line.trim();
    let Some(rest) = line.strip_prefix('/') else {
        return Ok(None);
    };
    // `//text` sends `/text` as a message.
    if rest.starts_with('/') {
        return Ok(None);
    }
    let (name, arg) = match rest.split_once(char::is_whitespace) {
        Some((n, a)) => (n, a.trim()),
        None => (rest, ""),
    };
    let arg_opt = (!arg.is_empty()).then(|| arg.to_string());
    let need = |what: &str| -> Result<String, String> {
        arg_opt
            .clone()
            .ok_or_else(|| format!("/{name} needs {what}"))
    };
    let cmd = match name {
        "help" | "?" => Command::Help,
        "clear" => Command::Clear,
        "new" => Command::New,
        "resume" => Command::Resume(need("an alias, id or id prefix")?),
        "name" => Command::Name(need("an alias")?),
        "history" => Command::History(arg_opt),
        "compact" => Command::Compact,
        "retry" => Command::Retry,
        "rewind" => Command::Rewind(match arg {
            "" => 1,
            n => n
                .parse()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("/rewind takes a positive number, not {n:?}"))?,
        }),
        "model" => Command::Model(arg_opt),
        "plugins" => Command::Plugins,
        "mcp" => match arg
            .split_once(' ')
            .map_or((arg, ""), |(a, b)| (a, b.trim()))
        {
            ("", _) => Command::Mcp,
            ("refresh", "") => Command::McpRefresh(None),
            ("refresh", server) => Command::McpRefresh(Some(server.to_string())),
            (other, _) => {
                return Err(format!(
                    "/mcp takes nothing or `refresh [server]`, not {other:?}"
                ));
            }
        },
        "skill" | "skills" => Command::Skill(arg.to_string()),
        "memory" | "memories" => Command::Memory(parse_memory(arg)?),
        "watches" | "watch" => parse_watches(arg)?,
        "agents" => Command::Agents,
        "exit" | "quit" | "q" => Command::Exit,
        "ws" => parse_ws(arg)?,
        other => return Err(format!("unknown command /{other} (try /help)")),
    };
    Ok(Some(cmd))
}

fn parse_watches(arg: &str) -> Result<Command, String> {
    let (sub, rest) = arg.split_once(' ').unwrap_or((arg, ""));
    Ok(match sub {
        "" | "list" => Command::Watches { all: false },
        "all" => Command::Watches { all: true },
        "cancel" if !rest.trim().is_empty() => Command::WatchCancel(rest.trim().to_string()),
        "cancel" => return Err("/watches cancel needs a watch name or id".into()),
        other => {
            return Err(format!(
                "/watches takes nothing, `all` or `cancel <name>`, not {other:?}"
            ));
        }
    })
}

fn parse_memory(arg: &str) -> Result<MemoryCommand, String> {
    let (sub, rest) = match arg.split_once(char::is_whitespace) {
        Some((s, r)) => (s, r.trim()),
        None => (arg, ""),
    };
    let need = |what: &str| {
        (!rest.is_empty())
            .then(|| rest.to_string())
            .ok_or_else(|| format!("/memory {sub} needs {what}"))
    };
    Ok(match sub {
        "" | "list" | "ls" => MemoryCommand::List,
        "search" => MemoryCommand::Search(need("words to search for")?),
        "show" | "get" => MemoryCommand::Show(need("a name")?),
        "forget" | "delete" | "rm" => {
            let text = need("a name")?;
            match text.split_once(char::is_whitespace) {
                Some((name, scope)) => {
                    MemoryCommand::Forget(name.to_string(), Some(scope.trim().to_string()))
                }
                None => MemoryCommand::Forget(text, None),
            }
        }
        other => {
            return Err(format!(
                "/memory takes nothing, `search <q>`, `show <name>` or `forget <name> [scope]`, not {other:?}"
            ));
        }
    })
}

fn index(s: &str) -> Result<usize, String> {
    s.parse()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{s:?} is not a workstream number (see /ws list)"))
}

fn parse_ws(arg: &str) -> Result<Command, String> {
    let (sub, rest) = match arg.split_once(char::is_whitespace) {
        Some((s, r)) => (s, r.trim()),
        None => (arg, ""),
    };
    let rest_opt = (!rest.is_empty()).then(|| rest.to_string());
    Ok(match sub {
        "" | "list" | "ls" => Command::WsList,
        "new" => Command::WsNew(rest_opt),
        "close" => Command::WsClose(rest_opt.as_deref().map(index).transpose()?),
        "rename" => Command::WsRename(rest_opt.ok_or("/ws rename needs a name")?),
        n => Command::WsSwitch(index(n)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commands_and_rejects_bad_arguments() {
        assert_eq!(parse("hello").unwrap(), None);
        assert_eq!(parse("//etc/passwd is a path").unwrap(), None);
        assert_eq!(parse("/help").unwrap(), Some(Command::Help));
        assert_eq!(parse(" /rewind ").unwrap(), Some(Command::Rewind(1)));
        assert_eq!(parse("/rewind 3").unwrap(), Some(Command::Rewind(3)));
        assert!(
            parse("/rewind zero")
                .unwrap_err()
                .contains("positive number")
        );
        assert!(parse("/rewind 0").is_err());
        assert_eq!(
            parse("/resume my-work").unwrap(),
            Some(Command::Resume("my-work".into()))
        );
        assert!(parse("/resume").unwrap_err().contains("needs"));
        assert_eq!(parse("/model").unwrap(), Some(Command::Model(None)));
        assert_eq!(parse("/mcp").unwrap(), Some(Command::Mcp));
        assert_eq!(
            parse("/mcp refresh").unwrap(),
            Some(Command::McpRefresh(None))
        );
        assert_eq!(
            parse("/mcp refresh github").unwrap(),
            Some(Command::McpRefresh(Some("github".into())))
        );
        assert!(parse("/mcp frobnicate").unwrap_err().contains("refresh"));
        assert_eq!(parse("/ws").unwrap(), Some(Command::WsList));
        assert_eq!(
            parse("/ws new research notes").unwrap(),
            Some(Command::WsNew(Some("research notes".into())))
        );
        assert_eq!(parse("/ws 2").unwrap(), Some(Command::WsSwitch(2)));
        assert_eq!(parse("/ws close").unwrap(), Some(Command::WsClose(None)));
        assert_eq!(
            parse("/ws close 3").unwrap(),
            Some(Command::WsClose(Some(3)))
        );
        assert!(parse("/ws 0").is_err());
        assert!(parse("/ws rename").is_err());
        assert!(parse("/frobnicate").unwrap_err().contains("/help"));
        assert_eq!(
            parse("/skill review 42 depth=deep").unwrap(),
            Some(Command::Skill("review 42 depth=deep".into()))
        );
        assert_eq!(
            parse("/skill").unwrap(),
            Some(Command::Skill(String::new()))
        );
        assert_eq!(
            parse("/memory").unwrap(),
            Some(Command::Memory(MemoryCommand::List))
        );
        assert_eq!(
            parse("/memory search build flags").unwrap(),
            Some(Command::Memory(MemoryCommand::Search("build flags".into())))
        );
        assert_eq!(
            parse("/memory forget style user").unwrap(),
            Some(Command::Memory(MemoryCommand::Forget(
                "style".into(),
                Some("user".into())
            )))
        );
        assert!(parse("/memory show").unwrap_err().contains("needs a name"));
        assert!(parse("/memory wipe").unwrap_err().contains("forget"));
        assert_eq!(
            parse("/watches").unwrap(),
            Some(Command::Watches { all: false })
        );
        assert_eq!(
            parse("/watches all").unwrap(),
            Some(Command::Watches { all: true })
        );
        assert_eq!(
            parse("/watches cancel ci build").unwrap(),
            Some(Command::WatchCancel("ci build".into()))
        );
        assert!(parse("/watches cancel").unwrap_err().contains("needs"));
        assert!(parse("/watches stop").unwrap_err().contains("cancel"));
        assert_eq!(parse("/agents").unwrap(), Some(Command::Agents));
    }
}
