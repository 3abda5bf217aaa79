//! `word_count`: an example third-party tool written only with the SDK.

use turnstone_plugin_sdk::prelude::*;

/// Count the words of inline text or of a file.
#[derive(Deserialize, JsonSchema)]
pub struct WordCountArgs {
    /// Text to count. Give either `text` or `path`.
    pub text: Option<String>,
    /// File to count (relative to the working directory).
    pub path: Option<String>,
    /// Also report the most frequent words, up to this many.
    #[serde(default)]
    pub top: u32,
}

/// The tool.
pub struct WordCount;

fn tally(text: &str, top: u32) -> String {
    let lines = text.lines().count();
    let words: Vec<&str> = text.split_whitespace().collect();
    let chars = text.chars().count();
    let mut out = format!("lines: {lines}\nwords: {}\nchars: {chars}", words.len());
    if top > 0 {
        let mut freq = std::collections::BTreeMap::<String, u32>::new();
        for w in &words {
            *freq.entry(w.to_lowercase()).or_default() += 1;
        }
        let mut ranked: Vec<_> = freq.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        for (w, n) in ranked.into_iter().take(top as usize) {
            out.push_str(&format!("\n{n}\t{w}"));
        }
    }
    out
}

impl Tool for WordCount {
    type Args = WordCountArgs;
    const NAME: &'static str = "word_count";
    const DESCRIPTION: &'static str =
        "Count lines, words and characters of a text or of a file in the workspace.";

    fn meta() -> ToolMeta {
        ToolMeta {
            auto_approve: true,
            task_agent: true,
            primary_key: Some("text"),
            ..ToolMeta::default()
        }
    }

    fn prepare(args: &WordCountArgs, _ctx: &Context) -> Result<Preview, ToolError> {
        match (&args.text, &args.path) {
            (Some(_), Some(_)) | (None, None) => {
                Err(ToolError::new("give exactly one of `text` or `path`"))
            }
            (_, Some(p)) => Ok(Preview::auto(format!("word_count: {p}"))),
            (Some(t), None) => Ok(Preview::auto(format!(
                "word_count: {} chars of text",
                t.chars().count()
            ))),
        }
    }

    fn execute(args: WordCountArgs, ctx: &Context) -> Result<Output, ToolError> {
        let text = match (args.text, args.path) {
            (Some(t), None) => t,
            (None, Some(p)) => {
                let path = ctx.resolve(&p);
                std::fs::read_to_string(&path)
                    .map_err(|e| ToolError::new(turnstone_plugin_sdk::fs::explain(&path, &e)))?
            }
            _ => return Err(ToolError::new("give exactly one of `text` or `path`")),
        };
        Ok(tally(&text, args.top).into())
    }
}

register_tools!(WordCount);
