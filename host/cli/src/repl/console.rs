//! The terminal: streamed output above, and at the bottom a footer (spinner,
//! busy background workstreams) and the input line. Output goes to stdout; the
//! footer and the input line go to stderr, so `turnstone > log.txt` keeps the
//! reply clean. Every write goes through one lock so lines never interleave.
//!
//! A small line editor is built in rather than using rustyline/reedline: the
//! prompt stays live while a turn streams above it (so `/ws` and queued
//! messages work mid-turn), which needs output, footer and input redrawn as
//! one unit; those crates print external output only as whole redraws of
//! their own prompt and cannot host an animated footer.

use crate::markdown::strip_ansi;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;

/// Braille spinner frames (80 ms apart).
const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
/// Most remembered input lines.
const HISTORY_MAX: usize = 500;

/// What the user did at the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputEvent {
    /// A submitted line.
    Line(String),
    /// Ctrl-C.
    Interrupt,
    /// Ctrl-D on an empty line.
    Eof,
}

struct Screen {
    prompt: String,
    buf: Vec<char>,
    cursor: usize,
    spinner: Option<String>,
    frame: usize,
    status: Option<String>,
    /// Rows of footer + prompt currently on screen (0 = nothing drawn).
    drawn_rows: u16,
    /// Row of the cursor within the drawn block.
    cursor_row: u16,
    history: Vec<String>,
    history_pos: Option<usize>,
    stashed: Vec<char>,
}

/// The shared terminal.
pub struct Console {
    screen: Mutex<Screen>,
    /// A line editor and footer are drawn (stdin and stderr are terminals).
    interactive: bool,
    /// stdout is a terminal (raw mode needs `\r\n`).
    stdout_tty: bool,
    /// stderr is a terminal (spinner allowed).
    stderr_tty: bool,
    /// ANSI colour allowed.
    color: bool,
}

impl Console {
    /// Detects terminals and `NO_COLOR`.
    pub fn detect(interactive: bool) -> Self {
        let stdout_tty = std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Self {
            screen: Mutex::new(Screen {
                prompt: String::new(),
                buf: Vec::new(),
                cursor: 0,
                spinner: None,
                frame: 0,
                status: None,
                drawn_rows: 0,
                cursor_row: 0,
                history: Vec::new(),
                history_pos: None,
                stashed: Vec::new(),
            }),
            interactive,
            stdout_tty,
            stderr_tty: std::io::stderr().is_terminal(),
            color: !no_color && (stdout_tty || interactive),
        }
    }

    /// Whether ANSI styling may be used for content.
    pub fn color(&self) -> bool {
        self.color
    }

    /// Whether content is rendered for a terminal (else raw markdown passes through).
    pub fn renders_markdown(&self) -> bool {
        self.stdout_tty
    }

    /// Whether the line editor is active.
    pub fn interactive(&self) -> bool {
        self.interactive
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Screen> {
        self.screen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Prints whole lines of content above the footer.
    pub fn print_lines(&self, lines: &[String]) {
        if lines.is_empty() {
            return;
        }
        let mut s = self.lock();
        self.clear_footer(&mut s);
        let mut out = std::io::stdout().lock();
        let nl = if self.stdout_tty && self.interactive {
            "\r\n"
        } else {
            "\n"
        };
        for l in lines {
            let l = if self.color { l.clone() } else { strip_ansi(l) };
            let _ = write!(out, "{l}{nl}");
        }
        let _ = out.flush();
        drop(out);
        self.draw_footer(&mut s);
    }

    /// Prints one line of content.
    pub fn print(&self, line: impl Into<String>) {
        self.print_lines(&[line.into()]);
    }

    /// Prints error lines: to stderr when there is no terminal UI (piped
    /// mode keeps stdout for replies), else like any other output.
    pub fn print_errors(&self, lines: &[String]) {
        if self.interactive {
            return self.print_lines(lines);
        }
        let mut s = self.lock();
        self.clear_footer(&mut s);
        let mut err = std::io::stderr().lock();
        for l in lines {
            let _ = writeln!(err, "{}", strip_ansi(l));
        }
        let _ = err.flush();
        drop(err);
        self.draw_footer(&mut s);
    }

    /// Rings the terminal bell (stderr).
    pub fn bell(&self) {
        if self.stderr_tty {
            let _ = std::io::stderr().write_all(b"\x07");
        }
    }

    /// Shows (or hides) the spinner with a label.
    pub fn set_spinner(&self, label: Option<String>) {
        let mut s = self.lock();
        if s.spinner == label {
            return;
        }
        self.clear_footer(&mut s);
        s.spinner = label;
        self.draw_footer(&mut s);
    }

    /// Sets the status part of the footer (busy background workstreams).
    pub fn set_status(&self, status: Option<String>) {
        let mut s = self.lock();
        if s.status == status {
            return;
        }
        self.clear_footer(&mut s);
        s.status = status;
        self.draw_footer(&mut s);
    }

    /// Advances the spinner; returns false when none is shown.
    pub fn tick(&self) -> bool {
        let mut s = self.lock();
        if s.spinner.is_none() {
            return false;
        }
        s.frame = (s.frame + 1) % FRAMES.len();
        self.clear_footer(&mut s);
        self.draw_footer(&mut s);
        true
    }

    /// Sets the prompt text.
    pub fn set_prompt(&self, prompt: &str) {
        let mut s = self.lock();
        if s.prompt == prompt {
            return;
        }
        self.clear_footer(&mut s);
        s.prompt = prompt.to_string();
        self.draw_footer(&mut s);
    }

    /// Removes footer and prompt from the screen (before exiting).
    pub fn teardown(&self) {
        let mut s = self.lock();
        self.clear_footer(&mut s);
        s.spinner = None;
        s.status = None;
    }

    fn footer_text(&self, s: &Screen) -> Option<String> {
        let spin = s
            .spinner
            .as_ref()
            .map(|l| format!("{} {l}", FRAMES[s.frame]));
        let text = match (spin, &s.status) {
            (Some(a), Some(b)) => format!("{a}   {b}"),
            (Some(a), None) => a,
            (None, Some(b)) => b.clone(),
            (None, None) => return None,
        };
        Some(if self.color {
            format!("\x1b[2m{text}\x1b[0m")
        } else {
            text
        })
    }

    fn clear_footer(&self, s: &mut Screen) {
        if s.drawn_rows == 0 {
            return;
        }
        let mut err = std::io::stderr().lock();
        let up = s.cursor_row;
        let _ = if up > 0 {
            write!(err, "\r\x1b[{up}A\x1b[J")
        } else {
            write!(err, "\r\x1b[J")
        };
        let _ = err.flush();
        s.drawn_rows = 0;
        s.cursor_row = 0;
    }

    fn draw_footer(&self, s: &mut Screen) {
        if !self.stderr_tty {
            return;
        }
        let footer = self.footer_text(s);
        let mut err = std::io::stderr().lock();
        let mut rows = 0;
        let width = crossterm::terminal::size()
            .map(|(w, _)| w as usize)
            .unwrap_or(80)
            .max(10);
        if let Some(f) = footer {
            let f = truncate_visible(&f, width - 1);
            let _ = if self.interactive {
                write!(err, "{f}\r\n")
            } else {
                write!(err, "{f}")
            };
            rows += 1;
        }
        if self.interactive {
            let prompt_w = crate::markdown::visible_width(&s.prompt);
            let room = width.saturating_sub(prompt_w + 1).max(1);
            // Scroll the input horizontally so the cursor stays visible.
            let start = s.cursor.saturating_sub(room);
            let end = (start + room).min(s.buf.len());
            let shown: String = s.buf[start..end].iter().collect();
            let before: String = s.buf[start..s.cursor].iter().collect();
            let tail =
                crate::markdown::visible_width(&shown) - crate::markdown::visible_width(&before);
            let prompt = if self.color {
                format!("\x1b[1;32m{}\x1b[0m", s.prompt)
            } else {
                s.prompt.clone()
            };
            let _ = write!(err, "{prompt}{shown}");
            if tail > 0 {
                let _ = write!(err, "\x1b[{tail}D");
            }
            rows += 1;
        }
        let _ = err.flush();
        s.drawn_rows = rows;
        s.cursor_row = rows.saturating_sub(1);
        if !self.interactive && rows == 1 {
            // The spinner alone: stay on its row and clear it with `\r`.
            s.cursor_row = 0;
        }
    }

    fn redraw(&self, s: &mut Screen) {
        self.clear_footer(s);
        self.draw_footer(s);
    }

    /// Feeds one key to the line editor.
    pub fn key(&self, key: crossterm::event::KeyEvent) -> Option<InputEvent> {
        use crossterm::event::{KeyCode, KeyEventKind, KeyModifiers};
        if key.kind == KeyEventKind::Release {
            return None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let mut s = self.lock();
        let event = match key.code {
            KeyCode::Char('c') if ctrl => {
                // With text typed, Ctrl-C only clears the line.
                if s.buf.is_empty() {
                    Some(InputEvent::Interrupt)
                } else {
                    s.buf.clear();
                    s.cursor = 0;
                    s.history_pos = None;
                    None
                }
            }
            KeyCode::Char('d') if ctrl => {
                if s.buf.is_empty() {
                    Some(InputEvent::Eof)
                } else {
                    if s.cursor < s.buf.len() {
                        let c = s.cursor;
                        s.buf.remove(c);
                    }
                    None
                }
            }
            // Some terminals send LF (Ctrl-J) for Enter.
            KeyCode::Enter | KeyCode::Char('j') if key.code == KeyCode::Enter || ctrl => {
                let line: String = s.buf.drain(..).collect();
                s.cursor = 0;
                s.history_pos = None;
                if !line.trim().is_empty() && s.history.last() != Some(&line) {
                    s.history.push(line.clone());
                    if s.history.len() > HISTORY_MAX {
                        s.history.remove(0);
                    }
                }
                // Echo the submitted line into the transcript.
                let echo = format!("{}{}", s.prompt, line);
                drop(s);
                self.print(if self.color {
                    format!("\x1b[1m{echo}\x1b[0m")
                } else {
                    echo
                });
                return Some(InputEvent::Line(line));
            }
            KeyCode::Char('a') if ctrl => {
                s.cursor = 0;
                None
            }
            KeyCode::Char('e') if ctrl => {
                s.cursor = s.buf.len();
                None
            }
            KeyCode::Char('u') if ctrl => {
                let c = s.cursor;
                s.buf.drain(..c);
                s.cursor = 0;
                None
            }
            KeyCode::Char('k') if ctrl => {
                let c = s.cursor;
                s.buf.truncate(c);
                None
            }
            KeyCode::Char('w') if ctrl => {
                let mut start = s.cursor;
                while start > 0 && s.buf[start - 1] == ' ' {
                    start -= 1;
                }
                while start > 0 && s.buf[start - 1] != ' ' {
                    start -= 1;
                }
                let c = s.cursor;
                s.buf.drain(start..c);
                s.cursor = start;
                None
            }
            KeyCode::Char('l') if ctrl => {
                let _ = std::io::stderr().write_all(b"\x1b[2J\x1b[H");
                s.drawn_rows = 0;
                s.cursor_row = 0;
                None
            }
            KeyCode::Char(c) if !ctrl => {
                let i = s.cursor;
                s.buf.insert(i, c);
                s.cursor += 1;
                None
            }
            KeyCode::Tab => {
                let i = s.cursor;
                s.buf.insert(i, ' ');
                s.cursor += 1;
                None
            }
            KeyCode::Backspace => {
                if s.cursor > 0 {
                    s.cursor -= 1;
                    let c = s.cursor;
                    s.buf.remove(c);
                }
                None
            }
            KeyCode::Delete => {
                if s.cursor < s.buf.len() {
                    let c = s.cursor;
                    s.buf.remove(c);
                }
                None
            }
            KeyCode::Left => {
                s.cursor = s.cursor.saturating_sub(1);
                None
            }
            KeyCode::Right => {
                s.cursor = (s.cursor + 1).min(s.buf.len());
                None
            }
            KeyCode::Home => {
                s.cursor = 0;
                None
            }
            KeyCode::End => {
                s.cursor = s.buf.len();
                None
            }
            KeyCode::Up => {
                if !s.history.is_empty() {
                    let pos = match s.history_pos {
                        None => {
                            s.stashed = s.buf.clone();
                            s.history.len() - 1
                        }
                        Some(p) => p.saturating_sub(1),
                    };
                    s.history_pos = Some(pos);
                    s.buf = s.history[pos].chars().collect();
                    s.cursor = s.buf.len();
                }
                None
            }
            KeyCode::Down => {
                if let Some(p) = s.history_pos {
                    if p + 1 < s.history.len() {
                        s.history_pos = Some(p + 1);
                        s.buf = s.history[p + 1].chars().collect();
                    } else {
                        s.history_pos = None;
                        s.buf = std::mem::take(&mut s.stashed);
                    }
                    s.cursor = s.buf.len();
                }
                None
            }
            _ => None,
        };
        self.redraw(&mut s);
        event
    }

    /// Inserts pasted text into the input line (newlines become spaces).
    pub fn paste(&self, text: &str) {
        let mut s = self.lock();
        for c in text.chars() {
            let c = if c == '\n' || c == '\r' { ' ' } else { c };
            let i = s.cursor;
            s.buf.insert(i, c);
            s.cursor += 1;
        }
        self.redraw(&mut s);
    }
}

/// Cuts `s` to `width` visible columns (escapes kept, reset appended).
fn truncate_visible(s: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    let mut out = String::new();
    let mut w = 0;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            out.push(c);
            for e in chars.by_ref() {
                out.push(e);
                if e.is_ascii_alphabetic() {
                    break;
                }
            }
            continue;
        }
        let cw = c.width().unwrap_or(0);
        if w + cw > width {
            out.push_str("\x1b[0m");
            break;
        }
        w += cw;
        out.push(c);
    }
    out
}

/// Restores the terminal when dropped (also on panic).
pub struct RawModeGuard;

impl RawModeGuard {
    /// Enters raw mode.
    pub fn enable() -> std::io::Result<Self> {
        crossterm::terminal::enable_raw_mode()?;
        let _ = crossterm::execute!(std::io::stderr(), crossterm::event::EnableBracketedPaste);
        Ok(Self)
    }
}

impl Drop for RawModeGuard {
    fn drop(&mut self) {
        let _ = crossterm::execute!(std::io::stderr(), crossterm::event::DisableBracketedPaste);
        let _ = crossterm::terminal::disable_raw_mode();
    }
}
