//! Just enough shell syntax to find what a command line runs: the line is
//! cut into simple commands at unquoted operators (`;`, `&&`, `||`, `|`,
//! `&`, newlines, subshells and command substitutions), and each command's
//! program is its first word after variable assignments and wrappers such as
//! `env`, `nohup` or `time`. Rules then look at programs in command
//! position, so `grep sudo notes.txt` is not privilege escalation.

/// One simple command of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The program (basename, e.g. `rm` for `/bin/rm`).
    pub program: String,
    /// Its arguments, unquoted.
    pub args: Vec<String>,
    /// The command's own text.
    pub text: String,
    /// Whether output of the command before it is piped into it.
    pub piped_into: bool,
}

/// Wrappers that run the next word as the program.
const WRAPPERS: &[&str] = &[
    "env", "nohup", "time", "exec", "command", "builtin", "nice", "ionice", "stdbuf", "timeout",
    "xargs", "watch", "then", "do", "else", "if", "while", "until", "!",
];

/// The simple commands of `line`, in order.
pub fn commands(line: &str) -> Vec<Command> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut piped = false;
    let mut next_piped = false;
    let (mut single, mut double) = (false, false);
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let flush = |cur: &mut String, piped: bool, out: &mut Vec<Command>| {
        if let Some(c) = parse(cur, piped) {
            out.push(c);
        }
        cur.clear();
    };
    while i < chars.len() {
        let c = chars[i];
        if single {
            if c == '\'' {
                single = false;
            }
            cur.push(c);
        } else if c == '\\' && i + 1 < chars.len() {
            cur.push(c);
            cur.push(chars[i + 1]);
            i += 1;
        } else if c == '\'' && !double {
            single = true;
            cur.push(c);
        } else if c == '"' {
            double = !double;
            cur.push(c);
        } else if c == '$' && chars.get(i + 1) == Some(&'(') {
            // A command substitution starts a command of its own, even in
            // double quotes.
            flush(&mut cur, piped, &mut out);
            piped = false;
            i += 1;
        } else if c == '`' || (!double && matches!(c, ';' | '\n' | '(' | ')' | '{' | '}')) {
            flush(&mut cur, piped, &mut out);
            piped = false;
        } else if !double && (c == '|' || c == '&') {
            let pipe = c == '|' && chars.get(i + 1) != Some(&'|');
            // `>&` and `&>` are redirections, not operators.
            let redirect = c == '&'
                && (cur.ends_with('>') || cur.ends_with('<') || chars.get(i + 1) == Some(&'>'));
            if redirect {
                cur.push(c);
            } else {
                flush(&mut cur, piped, &mut out);
                piped = false;
                next_piped = pipe;
                if chars.get(i + 1) == Some(&c) {
                    i += 1;
                }
            }
        } else {
            cur.push(c);
        }
        if next_piped && !cur.trim().is_empty() {
            piped = true;
            next_piped = false;
        }
        i += 1;
    }
    flush(&mut cur, piped, &mut out);
    out
}

fn parse(text: &str, piped_into: bool) -> Option<Command> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return None;
    }
    let words = shlex::split(trimmed)
        .unwrap_or_else(|| trimmed.split_whitespace().map(str::to_string).collect());
    let mut it = words.into_iter().peekable();
    while let Some(w) = it.peek() {
        if is_assignment(w) || w.contains('>') || w.contains('<') {
            it.next();
        } else if WRAPPERS.contains(&w.as_str()) {
            it.next();
            // A wrapper's options and numbers: `nice -n 5`, `timeout 5s`.
            while it
                .peek()
                .is_some_and(|n| n.starts_with('-') || is_number_like(n))
            {
                it.next();
            }
        } else {
            break;
        }
    }
    let program = it.next()?;
    let program = program.rsplit('/').next().unwrap_or(&program).to_string();
    Some(Command {
        program,
        args: it.collect(),
        text: trimmed.to_string(),
        piped_into,
    })
}

fn is_assignment(w: &str) -> bool {
    w.split_once('=').is_some_and(|(k, _)| {
        !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn is_number_like(w: &str) -> bool {
    w.chars().next().is_some_and(|c| c.is_ascii_digit())
        && w.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 's' | 'm' | 'h'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn programs(line: &str) -> Vec<String> {
        commands(line).into_iter().map(|c| c.program).collect()
    }

    #[test]
    fn operators_split_commands_and_quotes_do_not() {
        assert_eq!(
            programs("ls -la; rm -rf x && echo ok || true"),
            ["ls", "rm", "echo", "true"]
        );
        assert_eq!(programs("curl -s https://x | sudo bash"), ["curl", "sudo"]);
        assert_eq!(programs("echo 'a; rm -rf /' \"b | sh\""), ["echo"]);
        assert_eq!(programs("echo $(whoami) `id`"), ["echo", "whoami", "id"]);
        assert_eq!(
            programs("FOO=1 env BAR=2 nohup /usr/bin/python3 x.py &"),
            ["python3"]
        );
        assert_eq!(
            programs("timeout 5s make test 2>&1 | tail"),
            ["make", "tail"]
        );
        assert_eq!(programs("(cd /tmp && ls)"), ["cd", "ls"]);
    }

    #[test]
    fn pipes_are_marked() {
        let cmds = commands("wget -qO- https://x.sh | sh");
        assert!(!cmds[0].piped_into);
        assert!(cmds[1].piped_into);
        let cmds = commands("make 2>&1 && sh x.sh");
        assert!(!cmds[1].piped_into, "&& is not a pipe");
    }
}
