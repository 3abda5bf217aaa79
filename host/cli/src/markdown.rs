//! Streaming markdown for the terminal: text arrives token by token and is
//! rendered one complete line at a time, so output appears as the model writes
//! it. Block structure (headings, lists, quotes, fences, tables, rules) is
//! tracked line by line here; inline spans within a line are parsed with
//! `pulldown-cmark`; code blocks are highlighted with `syntect` (loaded on the
//! first code block, so plain replies never pay for it).

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use std::sync::OnceLock;

/// How rendered text is styled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Styling {
    /// ANSI colours and attributes.
    Ansi,
    /// Structure only (for `NO_COLOR`): markers removed, no escape codes.
    Plain,
}

const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const ITALIC: &str = "\x1b[3m";
const UNDERLINE: &str = "\x1b[4m";
const STRIKE: &str = "\x1b[9m";
const CODE: &str = "\x1b[36m";
const HEADING: &str = "\x1b[1;35m";

/// Renders a stream of markdown text into terminal lines.
pub struct MarkdownStream {
    styling: Styling,
    partial: String,
    /// Inside a fenced code block: its fence marker and language.
    fence: Option<(String, String)>,
    code: Option<CodeHighlighter>,
    table: Vec<String>,
}

impl MarkdownStream {
    /// A renderer with the given styling.
    pub fn new(styling: Styling) -> Self {
        Self {
            styling,
            partial: String::new(),
            fence: None,
            code: None,
            table: Vec::new(),
        }
    }

    /// Adds streamed text; returns the lines it completed, rendered.
    pub fn push(&mut self, text: &str) -> Vec<String> {
        self.partial.push_str(text);
        let mut out = Vec::new();
        while let Some(nl) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=nl).collect();
            self.line(line.trim_end_matches(['\n', '\r']), &mut out);
        }
        out
    }

    /// Line-buffers text without rendering it (for output that is not a terminal).
    pub fn push_raw(&mut self, text: &str) -> Vec<String> {
        self.partial.push_str(text);
        let mut out = Vec::new();
        while let Some(nl) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=nl).collect();
            out.push(line.trim_end_matches(['\n', '\r']).to_string());
        }
        out
    }

    /// Ends a raw stream: the unfinished line, if any.
    pub fn finish_raw(&mut self) -> Vec<String> {
        let rest = std::mem::take(&mut self.partial);
        if rest.is_empty() {
            Vec::new()
        } else {
            vec![rest]
        }
    }

    /// Ends the stream: renders the unfinished line and any open table, and
    /// resets block state for the next message.
    pub fn finish(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        let rest = std::mem::take(&mut self.partial);
        if !rest.is_empty() {
            self.line(rest.trim_end_matches('\r'), &mut out);
        }
        self.flush_table(&mut out);
        self.fence = None;
        self.code = None;
        out
    }

    fn ansi(&self) -> bool {
        self.styling == Styling::Ansi
    }

    fn line(&mut self, line: &str, out: &mut Vec<String>) {
        let trimmed = line.trim_start();
        if let Some((marker, _)) = &self.fence {
            if trimmed.starts_with(marker.as_str()) && trimmed.trim_end() == marker.as_str() {
                self.fence = None;
                self.code = None;
                out.push(self.dim(line));
            } else {
                let rendered = match &mut self.code {
                    Some(h) => h.highlight(line),
                    None => line.to_string(),
                };
                out.push(rendered);
            }
            return;
        }
        if trimmed.starts_with('|') {
            self.table.push(trimmed.to_string());
            return;
        }
        self.flush_table(out);
        if let Some(marker) = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m)) {
            let lang = trimmed[marker.len()..].trim().to_string();
            self.code = self.ansi().then(|| CodeHighlighter::new(&lang));
            self.fence = Some((marker.to_string(), lang));
            out.push(self.dim(line));
            return;
        }
        out.push(self.block(line));
    }

    fn dim(&self, s: &str) -> String {
        if self.ansi() {
            format!("{DIM}{s}{RESET}")
        } else {
            s.to_string()
        }
    }

    /// One non-code, non-table line.
    fn block(&self, line: &str) -> String {
        let indent_len = line.len() - line.trim_start().len();
        let indent = &line[..indent_len];
        let body = &line[indent_len..];
        if body.is_empty() {
            return String::new();
        }
        if is_rule(body) {
            return self.dim(&"─".repeat(40));
        }
        if let Some((level, text)) = heading(body) {
            let inner = self.inline(text);
            return match (self.styling, level) {
                (Styling::Ansi, 1) => format!("{HEADING}{UNDERLINE}{inner}{RESET}"),
                (Styling::Ansi, _) => format!("{HEADING}{inner}{RESET}"),
                (Styling::Plain, 1) => inner.to_uppercase(),
                (Styling::Plain, _) => inner,
            };
        }
        if let Some(rest) = body.strip_prefix('>') {
            let inner = self.inline(rest.trim_start());
            return if self.ansi() {
                format!("{indent}{DIM}│{RESET} {ITALIC}{inner}{RESET}")
            } else {
                format!("{indent}│ {inner}")
            };
        }
        if let Some((marker, rest)) = list_item(body) {
            let (check, rest) = match rest.get(..4) {
                Some("[ ] ") => ("☐ ", &rest[4..]),
                Some("[x] ") | Some("[X] ") => ("☑ ", &rest[4..]),
                _ => ("", rest),
            };
            let bullet = match marker {
                Marker::Bullet => "•".to_string(),
                Marker::Number(n) => n,
            };
            let bullet = if self.ansi() {
                format!("{CODE}{bullet}{RESET}")
            } else {
                bullet
            };
            return format!("{indent}{bullet} {check}{}", self.inline(rest));
        }
        format!("{indent}{}", self.inline(body))
    }

    /// Inline spans (emphasis, code, links, strikethrough) of one line.
    fn inline(&self, text: &str) -> String {
        let ansi = self.ansi();
        let mut out = String::new();
        // Styles currently open, re-applied after each nested reset.
        let mut stack: Vec<&'static str> = Vec::new();
        let mut link: Option<String> = None;
        let reapply = |out: &mut String, stack: &[&'static str]| {
            out.push_str(RESET);
            for s in stack {
                out.push_str(s);
            }
        };
        for ev in Parser::new_ext(text, Options::ENABLE_STRIKETHROUGH) {
            match ev {
                Event::Text(t) => out.push_str(&t),
                Event::Code(c) => {
                    if ansi {
                        out.push_str(CODE);
                        out.push_str(&c);
                        reapply(&mut out, &stack);
                    } else {
                        out.push_str(&c);
                    }
                }
                Event::Start(tag) => {
                    let style = match tag {
                        Tag::Strong => Some(BOLD),
                        Tag::Emphasis => Some(ITALIC),
                        Tag::Strikethrough => Some(STRIKE),
                        Tag::Link { dest_url, .. } => {
                            link = Some(dest_url.to_string());
                            Some(UNDERLINE)
                        }
                        _ => None,
                    };
                    if let Some(s) = style {
                        stack.push(s);
                        if ansi {
                            out.push_str(s);
                        }
                    }
                }
                Event::End(tag) => {
                    let styled = matches!(
                        tag,
                        TagEnd::Strong | TagEnd::Emphasis | TagEnd::Strikethrough | TagEnd::Link
                    );
                    if styled {
                        stack.pop();
                        if ansi {
                            reapply(&mut out, &stack);
                        }
                    }
                    if tag == TagEnd::Link
                        && let Some(url) = link.take()
                        && !out.ends_with(&url)
                    {
                        if ansi {
                            out.push_str(&format!("{DIM} ({url}){RESET}"));
                            reapply(&mut out, &stack);
                        } else {
                            out.push_str(&format!(" ({url})"));
                        }
                    }
                }
                Event::SoftBreak | Event::HardBreak => out.push(' '),
                Event::Html(h) | Event::InlineHtml(h) => out.push_str(&h),
                _ => {}
            }
        }
        if ansi && !stack.is_empty() {
            out.push_str(RESET);
        }
        out
    }

    /// Renders buffered table rows with aligned columns.
    fn flush_table(&mut self, out: &mut Vec<String>) {
        if self.table.is_empty() {
            return;
        }
        let rows: Vec<Vec<String>> = std::mem::take(&mut self.table)
            .iter()
            .map(|r| split_row(r))
            .collect();
        let is_sep = |r: &Vec<String>| {
            !r.is_empty()
                && r.iter().all(|c| {
                    let c = c.trim();
                    !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':'))
                })
        };
        let has_header = rows.len() >= 2 && is_sep(&rows[1]);
        // Column alignment from the separator row (`:--`, `--:`, `:-:`).
        let aligns: Vec<char> = if has_header {
            rows[1]
                .iter()
                .map(|c| {
                    let c = c.trim();
                    match (c.starts_with(':'), c.ends_with(':')) {
                        (true, true) => 'c',
                        (false, true) => 'r',
                        _ => 'l',
                    }
                })
                .collect()
        } else {
            Vec::new()
        };
        let cells: Vec<Vec<String>> = rows
            .iter()
            .enumerate()
            .filter(|(i, _)| !(has_header && *i == 1))
            .map(|(_, r)| r.iter().map(|c| self.inline(c.trim())).collect())
            .collect();
        let ncols = cells.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0usize; ncols];
        for row in &cells {
            for (i, c) in row.iter().enumerate() {
                widths[i] = widths[i].max(visible_width(c));
            }
        }
        let border = |l: &str, m: &str, r: &str| {
            let inner: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
            self.dim(&format!("{l}{}{r}", inner.join(m)))
        };
        out.push(border("┌", "┬", "┐"));
        for (ri, row) in cells.iter().enumerate() {
            let mut line = self.dim("│");
            for (i, w) in widths.iter().enumerate() {
                let c = row.get(i).map(String::as_str).unwrap_or("");
                let pad = w - visible_width(c);
                let c = if has_header && ri == 0 && self.ansi() {
                    format!("{BOLD}{c}{RESET}")
                } else {
                    c.to_string()
                };
                let (left, right) = match aligns.get(i) {
                    Some('r') => (pad, 0),
                    Some('c') => (pad / 2, pad - pad / 2),
                    _ => (0, pad),
                };
                line.push_str(&format!(" {}{c}{} ", " ".repeat(left), " ".repeat(right)));
                line.push_str(&self.dim("│"));
            }
            out.push(line);
            if has_header && ri == 0 {
                out.push(border("├", "┼", "┤"));
            }
        }
        out.push(border("└", "┴", "┘"));
    }
}

enum Marker {
    Bullet,
    Number(String),
}

fn is_rule(s: &str) -> bool {
    let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    t.len() >= 3
        && (t.chars().all(|c| c == '-')
            || t.chars().all(|c| c == '*')
            || t.chars().all(|c| c == '_'))
}

fn heading(s: &str) -> Option<(usize, &str)> {
    let level = s.chars().take_while(|&c| c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &s[level..];
    if rest.is_empty() {
        return Some((level, ""));
    }
    rest.strip_prefix(' ')
        .map(|t| (level, t.trim().trim_end_matches('#').trim_end()))
}

fn list_item(s: &str) -> Option<(Marker, &str)> {
    for b in ["- ", "* ", "+ "] {
        if let Some(rest) = s.strip_prefix(b) {
            return Some((Marker::Bullet, rest));
        }
    }
    let digits = s.chars().take_while(char::is_ascii_digit).count();
    if (1..=9).contains(&digits) {
        let rest = &s[digits..];
        for d in [". ", ") "] {
            if let Some(r) = rest.strip_prefix(d) {
                return Some((Marker::Number(format!("{}.", &s[..digits])), r));
            }
        }
    }
    None
}

fn split_row(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut cells = Vec::new();
    let mut cur = String::new();
    let mut escaped = false;
    for c in inner.chars() {
        match c {
            '\\' if !escaped => escaped = true,
            '|' if !escaped => cells.push(std::mem::take(&mut cur)),
            _ => {
                if escaped && c != '|' {
                    cur.push('\\');
                }
                escaped = false;
                cur.push(c);
            }
        }
    }
    cells.push(cur);
    cells
}

/// Display width, ignoring ANSI escape sequences.
pub fn visible_width(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(strip_ansi(s).as_str())
}

/// Removes ANSI escape sequences (CSI: ESC, parameters, a final letter).
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for e in chars.by_ref() {
                if e.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

struct Syntaxes {
    set: syntect::parsing::SyntaxSet,
    theme: syntect::highlighting::Theme,
}

fn syntaxes() -> Option<&'static Syntaxes> {
    static CELL: OnceLock<Option<Syntaxes>> = OnceLock::new();
    CELL.get_or_init(|| {
        let set = syntect::parsing::SyntaxSet::load_defaults_newlines();
        let mut themes = syntect::highlighting::ThemeSet::load_defaults();
        let theme = themes.themes.remove("base16-ocean.dark")?;
        Some(Syntaxes { set, theme })
    })
    .as_ref()
}

/// Highlights a fenced block line by line, keeping parser state across lines.
struct CodeHighlighter {
    inner: Option<syntect::easy::HighlightLines<'static>>,
}

impl CodeHighlighter {
    fn new(lang: &str) -> Self {
        let inner = (!lang.is_empty()).then(syntaxes).flatten().and_then(|s| {
            let token = lang.split([' ', ',', '{']).next().unwrap_or(lang);
            let syntax = s
                .set
                .find_syntax_by_token(token)
                .or_else(|| s.set.find_syntax_by_extension(token))?;
            Some(syntect::easy::HighlightLines::new(syntax, &s.theme))
        });
        Self { inner }
    }

    fn highlight(&mut self, line: &str) -> String {
        let (Some(h), Some(s)) = (&mut self.inner, syntaxes()) else {
            return format!("{CODE}{line}{RESET}");
        };
        let with_nl = format!("{line}\n");
        match h.highlight_line(&with_nl, &s.set) {
            Ok(ranges) => {
                let mut out = syntect::util::as_24_bit_terminal_escaped(&ranges, false);
                while out.ends_with('\n') {
                    out.pop();
                }
                out.push_str(RESET);
                out
            }
            Err(_) => format!("{CODE}{line}{RESET}"),
        }
    }
}

#[cfg(test)]
mod tests;
