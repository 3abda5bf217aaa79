//! Snapshot tests of representative replies, rendered in both stylings and
//! streamed in awkward chunk sizes.

use super::*;

const SAMPLE: &[&str] = &[
    "# Plan",
    "Here is **bold**, *italic*, `code`, ~~gone~~ and a [link](https://example.com).",
    "",
    "## Steps",
    "- first item with `ls -la`",
    "  - nested item",
    "1. numbered",
    "- [ ] todo",
    "- [x] done",
    "> quoted *text*",
    "",
    "---",
    "```rust",
    "fn main() { println!(\"hi\"); }",
    "```",
    "| Name | Size | Kind |",
    "|------|-----:|:----:|",
    "| a.rs | 10 | src |",
    "| **b**.rs | 2000 | test |",
    "Done.",
];

fn sample() -> String {
    SAMPLE.join("\n")
}

fn render(text: &str, styling: Styling, chunk: usize) -> String {
    let mut md = MarkdownStream::new(styling);
    let mut lines = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(chunk) {
        lines.extend(md.push(&piece.iter().collect::<String>()));
    }
    lines.extend(md.finish());
    lines.join("\n")
}

#[test]
fn plain_rendering_of_a_representative_reply() {
    insta::assert_snapshot!(render(&sample(), Styling::Plain, 1000));
}

#[test]
fn ansi_rendering_of_a_representative_reply() {
    // Escapes are shown as `ESC` so the snapshot is readable.
    insta::assert_snapshot!(render(&sample(), Styling::Ansi, 1000).replace('\x1b', "ESC"));
}

#[test]
fn chunking_does_not_change_the_output() {
    let whole = render(&sample(), Styling::Ansi, 100_000);
    for chunk in [1, 2, 3, 7, 64] {
        assert_eq!(
            render(&sample(), Styling::Ansi, chunk),
            whole,
            "chunk {chunk}"
        );
    }
}

#[test]
fn lines_are_emitted_as_soon_as_they_complete() {
    let mut md = MarkdownStream::new(Styling::Plain);
    assert!(md.push("Hello wor").is_empty());
    assert_eq!(md.push("ld\nnext"), ["Hello world"]);
    // A table is held back until it ends, then drawn aligned.
    assert_eq!(md.push("\n| a | b |\n| - | - |\n| 1 | 22 |\n"), ["next"]);
    let out = md.push("after\n");
    assert_eq!(out.len(), 6, "{out:#?}");
    assert_eq!(out[1], "│ a │ b  │");
    assert_eq!(out[3], "│ 1 │ 22 │");
    assert_eq!(out[5], "after");
    assert!(md.finish().is_empty());
}

#[test]
fn an_unclosed_fence_and_partial_line_are_flushed_at_the_end() {
    let mut md = MarkdownStream::new(Styling::Plain);
    assert_eq!(md.push("```\nlet x = 1;\n"), ["```", "let x = 1;"]);
    assert_eq!(md.finish(), Vec::<String>::new());
    // Block state is reset: the next message starts outside the fence.
    assert_eq!(md.push("# Title\n"), ["TITLE"]);
    assert_eq!(md.push("tail"), Vec::<String>::new());
    assert_eq!(md.finish(), ["tail"]);
}

#[test]
fn code_in_a_known_language_is_highlighted_in_24_bit_colour() {
    let out = render(
        "```python\ndef f(x):\n    return x\n```\n",
        Styling::Ansi,
        5,
    );
    assert!(out.contains("\x1b[38;2;"), "{out:?}");
    assert_eq!(
        visible_width(out.lines().nth(1).unwrap()),
        "def f(x):".len()
    );
    // Markdown inside a code block is not interpreted.
    let raw = render("```\n**not bold**\n```\n", Styling::Plain, 3);
    assert!(raw.contains("**not bold**"));
}
