//! A lexer for the shell syntax the guard needs: a command line becomes the
//! simple commands it would run (argument words with quotes and escapes
//! resolved, redirections apart), including those inside `$(…)`, backticks
//! and process substitutions. Heredoc bodies and comments are data, not
//! commands, and are skipped.
//!
//! Hand-written rather than a crate: the one maintained bash parser
//! (`brush-parser`) carries `insta` and `cached` as runtime dependencies into
//! the component, and the guard needs words and operators, not a full AST.
//! It is not a shell: expansions stay literal (`$HOME`, `~`, globs), which is
//! what the guard's rules match on.

/// One simple command: its words (assignments and command name included) and
/// its redirections.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimpleCommand {
    /// Words after quote removal.
    pub words: Vec<String>,
    /// Redirections (`>`, `>>`, `<`, …) with their targets.
    pub redirects: Vec<Redirect>,
}

/// One redirection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The operator, e.g. `>`, `>>`, `&>`, `<`, `<<`.
    pub op: String,
    /// Its target word after quote removal.
    pub target: String,
}

impl Redirect {
    /// Whether the redirection writes to its target.
    pub fn writes(&self) -> bool {
        self.op.contains('>') && !self.op.starts_with(">&")
    }
}

/// Nesting limit for substitutions (a hostile command cannot recurse forever).
const MAX_DEPTH: usize = 16;

/// Words that open or close compound commands; dropped at command start.
const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "case", "esac",
    "select", "function", "{", "}", "!", "[[", "]]", "in",
];

/// Every simple command `src` would run, in order, nested ones included.
pub fn commands(src: &str) -> Vec<SimpleCommand> {
    let mut out = Vec::new();
    lex(&src.chars().collect::<Vec<_>>(), 0, &mut out);
    out
}

struct Lexer<'a> {
    chars: &'a [char],
    pos: usize,
    depth: usize,
}

fn lex(chars: &[char], depth: usize, out: &mut Vec<SimpleCommand>) {
    if depth > MAX_DEPTH {
        return;
    }
    let mut lx = Lexer {
        chars,
        pos: 0,
        depth,
    };
    let mut cur = SimpleCommand::default();
    let mut redirect_op: Option<String> = None;
    let mut heredocs: Vec<(String, bool)> = Vec::new();
    let finish = |cur: &mut SimpleCommand, out: &mut Vec<SimpleCommand>| {
        if !cur.words.is_empty() || !cur.redirects.is_empty() {
            out.push(std::mem::take(cur));
        }
    };
    while let Some(c) = lx.peek(0) {
        match c {
            ' ' | '\t' => lx.pos += 1,
            '\\' if lx.peek(1) == Some('\n') => lx.pos += 2,
            '\n' => {
                lx.pos += 1;
                finish(&mut cur, out);
                for (delim, strip_tabs) in heredocs.drain(..) {
                    lx.skip_heredoc(&delim, strip_tabs);
                }
            }
            '#' => lx.skip_comment(),
            ';' | '&' | '|' | '(' | ')' if !(c == '&' && lx.peek(1) == Some('>')) => {
                lx.pos += 1;
                // `&&`, `||`, `;;`, `|&`: one operator.
                if matches!(lx.peek(0), Some(n) if n == c || (c == '|' && n == '&')) {
                    lx.pos += 1;
                }
                finish(&mut cur, out);
            }
            '<' | '>' if lx.peek(1) == Some('(') => {
                // Process substitution runs a command list.
                lx.pos += 1;
                let inner = lx.balanced('(', ')');
                lex(&inner, depth + 1, out);
            }
            '<' | '>' | '&' => {
                let op = lx.redirect_op();
                if op.ends_with("&-") {
                    // `>&-` closes a descriptor: no target word.
                    cur.redirects.push(Redirect {
                        op,
                        target: String::new(),
                    });
                } else {
                    redirect_op = Some(op);
                }
            }
            _ => {
                let word = lx.word(out);
                if let Some(op) = redirect_op.take() {
                    if op.starts_with("<<") && op != "<<<" {
                        heredocs.push((word.clone(), op == "<<-"));
                    }
                    cur.redirects.push(Redirect { op, target: word });
                } else if lx.at_redirect() && word.chars().all(|d| d.is_ascii_digit()) {
                    // `2>file`: the digits are the descriptor, not a word.
                } else if cur.words.is_empty() && KEYWORDS.contains(&word.as_str()) {
                } else {
                    cur.words.push(word);
                }
            }
        }
    }
    finish(&mut cur, out);
}

impl Lexer<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn at_redirect(&self) -> bool {
        matches!(self.peek(0), Some('<' | '>'))
    }

    fn skip_comment(&mut self) {
        while let Some(c) = self.peek(0) {
            if c == '\n' {
                return;
            }
            self.pos += 1;
        }
    }

    /// Skips heredoc body lines up to and including the delimiter line.
    fn skip_heredoc(&mut self, delim: &str, strip_tabs: bool) {
        while self.pos < self.chars.len() {
            let start = self.pos;
            while self.peek(0).is_some_and(|c| c != '\n') {
                self.pos += 1;
            }
            let line: String = self.chars[start..self.pos].iter().collect();
            self.pos += 1; // the newline
            let line = if strip_tabs {
                line.trim_start_matches('\t')
            } else {
                &line
            };
            if line == delim {
                return;
            }
        }
    }

    fn redirect_op(&mut self) -> String {
        let mut op = String::new();
        while let Some(c) = self.peek(0) {
            let take = match c {
                '<' | '>' | '&' | '|' | '-' => {
                    // `-` only in `<<-` and `>&-`; `|` only in `>|`.
                    (c != '-' || op == "<<" || op.ends_with('&'))
                        && (c != '|' || op == ">")
                        && (c != '&' || op.is_empty() || op.ends_with('>') || op.ends_with('<'))
                }
                _ => false,
            };
            if !take {
                break;
            }
            op.push(c);
            self.pos += 1;
        }
        op
    }

    /// Reads one word, resolving quotes and escapes; nested commands go to `out`.
    fn word(&mut self, out: &mut Vec<SimpleCommand>) -> String {
        let mut w = String::new();
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' | '\n' | ';' | '&' | '|' | '(' | ')' | '<' | '>' => break,
                '\\' => {
                    self.pos += 1;
                    match self.peek(0) {
                        Some('\n') => self.pos += 1, // line continuation
                        Some(n) => {
                            w.push(n);
                            self.pos += 1;
                        }
                        None => {}
                    }
                }
                '\'' => {
                    self.pos += 1;
                    while let Some(n) = self.peek(0) {
                        self.pos += 1;
                        if n == '\'' {
                            break;
                        }
                        w.push(n);
                    }
                }
                '"' => {
                    self.pos += 1;
                    self.double_quoted(&mut w, out);
                }
                '`' => {
                    self.pos += 1;
                    let inner = self.until_backtick();
                    lex(&inner, self.depth + 1, out);
                    w.push_str("$(…)");
                }
                '$' => self.dollar(&mut w, out),
                _ => {
                    w.push(c);
                    self.pos += 1;
                }
            }
        }
        w
    }

    fn double_quoted(&mut self, w: &mut String, out: &mut Vec<SimpleCommand>) {
        while let Some(c) = self.peek(0) {
            match c {
                '"' => {
                    self.pos += 1;
                    return;
                }
                '\\' => {
                    self.pos += 1;
                    match self.peek(0) {
                        Some(n @ ('$' | '`' | '"' | '\\')) => {
                            w.push(n);
                            self.pos += 1;
                        }
                        Some('\n') => self.pos += 1,
                        _ => w.push('\\'),
                    }
                }
                '`' => {
                    self.pos += 1;
                    let inner = self.until_backtick();
                    lex(&inner, self.depth + 1, out);
                    w.push_str("$(…)");
                }
                '$' => self.dollar(w, out),
                _ => {
                    w.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    /// `$(…)`, `$((…))`, `${…}`, `$'…'` or a plain `$`.
    fn dollar(&mut self, w: &mut String, out: &mut Vec<SimpleCommand>) {
        match (self.peek(1), self.peek(2)) {
            (Some('('), Some('(')) => {
                self.pos += 1;
                let inner = self.balanced('(', ')');
                w.push('$');
                w.push('(');
                w.extend(inner.iter());
                w.push(')');
            }
            (Some('('), _) => {
                self.pos += 1;
                let inner = self.balanced('(', ')');
                lex(&inner, self.depth + 1, out);
                w.push_str("$(…)");
            }
            (Some('{'), _) => {
                self.pos += 1;
                let inner = self.balanced('{', '}');
                w.push_str("${");
                w.extend(inner.iter());
                w.push('}');
            }
            (Some('\''), _) => {
                // ANSI-C quoting: backslash escapes, no expansion.
                self.pos += 2;
                while let Some(n) = self.peek(0) {
                    self.pos += 1;
                    match n {
                        '\'' => break,
                        '\\' => {
                            if let Some(e) = self.peek(0) {
                                self.pos += 1;
                                w.push(match e {
                                    'n' => '\n',
                                    't' => '\t',
                                    other => other,
                                });
                            }
                        }
                        other => w.push(other),
                    }
                }
            }
            _ => {
                w.push('$');
                self.pos += 1;
            }
        }
    }

    /// At `open`: the text up to the matching `close`, quotes respected.
    fn balanced(&mut self, open: char, close: char) -> Vec<char> {
        self.pos += 1; // the opening character
        let start = self.pos;
        let mut depth = 1;
        while let Some(c) = self.peek(0) {
            match c {
                '\\' => self.pos += 1,
                '\'' => {
                    self.pos += 1;
                    while self.peek(0).is_some_and(|n| n != '\'') {
                        self.pos += 1;
                    }
                }
                '"' => {
                    self.pos += 1;
                    while let Some(n) = self.peek(0) {
                        if n == '\\' {
                            self.pos += 1;
                        } else if n == '"' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                c if c == open => depth += 1,
                c if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        let inner = self.chars[start..self.pos].to_vec();
                        self.pos += 1;
                        return inner;
                    }
                }
                _ => {}
            }
            self.pos += 1;
        }
        self.chars[start.min(self.chars.len())..].to_vec()
    }

    fn until_backtick(&mut self) -> Vec<char> {
        let mut inner = Vec::new();
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            match c {
                '`' => break,
                '\\' => {
                    if let Some(n) = self.peek(0) {
                        self.pos += 1;
                        if !matches!(n, '`' | '\\' | '$') {
                            inner.push('\\');
                        }
                        inner.push(n);
                    }
                }
                other => inner.push(other),
            }
        }
        inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(src: &str) -> Vec<Vec<String>> {
        commands(src).into_iter().map(|c| c.words).collect()
    }

    fn w(list: &[&[&str]]) -> Vec<Vec<String>> {
        list.iter()
            .map(|c| c.iter().map(|s| s.to_string()).collect())
            .collect()
    }

    #[test]
    fn operators_split_commands() {
        assert_eq!(
            words("a 1; b 2 && c || d | e |& f & g\nh"),
            w(&[
                &["a", "1"],
                &["b", "2"],
                &["c"],
                &["d"],
                &["e"],
                &["f"],
                &["g"],
                &["h"]
            ])
        );
        assert_eq!(
            words("(cd x; rm y) && { z; }"),
            w(&[&["cd", "x"], &["rm", "y"], &["z"]])
        );
        assert_eq!(
            words("if true; then rm a; fi; for f in 1 2; do echo $f; done"),
            w(&[
                &["true"],
                &["rm", "a"],
                &["f", "in", "1", "2"],
                &["echo", "$f"]
            ])
        );
    }

    #[test]
    fn quotes_and_escapes_are_resolved() {
        assert_eq!(
            words(r#"echo 'a b' "c $HOME \"d\"" e\ f \r\m $'x\ty'"#),
            w(&[&["echo", "a b", "c $HOME \"d\"", "e f", "rm", "x\ty"]])
        );
        assert_eq!(words("echo 'rm -rf /'"), w(&[&["echo", "rm -rf /"]]));
        assert_eq!(words("a \\\n b"), w(&[&["a", "b"]]));
    }

    #[test]
    fn substitutions_run_their_commands() {
        assert_eq!(
            words("echo $(rm -rf x) `reboot` \"$(cat /y)\" <(ls z) ${A:-b} $((1+2))"),
            w(&[
                &["rm", "-rf", "x"],
                &["reboot"],
                &["cat", "/y"],
                &["ls", "z"],
                &["echo", "$(…)", "$(…)", "$(…)", "${A:-b}", "$((1+2))"],
            ])
        );
        assert_eq!(
            words("x=$(echo $(id -u))"),
            w(&[&["id", "-u"], &["echo", "$(…)"], &["x=$(…)"]])
        );
    }

    #[test]
    fn redirections_are_apart_from_words() {
        let c = commands("cat a 2>/dev/null >out.txt < in &>all >>log 2>&1 >| f");
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].words, vec!["cat", "a"]);
        let ops: Vec<(&str, &str)> = c[0]
            .redirects
            .iter()
            .map(|r| (r.op.as_str(), r.target.as_str()))
            .collect();
        assert_eq!(
            ops,
            vec![
                (">", "/dev/null"),
                (">", "out.txt"),
                ("<", "in"),
                ("&>", "all"),
                (">>", "log"),
                (">&", "1"),
                (">|", "f"),
            ]
        );
        assert!(c[0].redirects[0].writes() && !c[0].redirects[2].writes());
    }

    #[test]
    fn heredoc_bodies_and_comments_are_data() {
        assert_eq!(
            words("cat <<EOF > notes\nreboot now\nrm -rf /\nEOF\nls # rm -rf /\necho done"),
            w(&[&["cat"], &["ls"], &["echo", "done"]])
        );
        assert_eq!(
            words("cat <<-'END'\n\treboot\n\tEND\nx"),
            w(&[&["cat"], &["x"]])
        );
        assert_eq!(words("echo a#b"), w(&[&["echo", "a#b"]]));
    }

    #[test]
    fn hostile_input_terminates() {
        let deep = "$(".repeat(10_000);
        assert!(commands(&deep).len() <= MAX_DEPTH + 1);
        for s in ["'", "\"", "$(", "`", "${", "<<", "\\", "$'\\"] {
            commands(s);
        }
    }
}
