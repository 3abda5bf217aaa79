//! `web_search` through a SearxNG instance (`[tools] searxng_url`).

use turnstone_plugin_sdk::http::Request;
use turnstone_plugin_sdk::prelude::*;
use turnstone_plugin_sdk::serde_json::Value;

/// Most results a call may ask for.
pub const MAX_RESULTS: usize = 20;

/// Arguments of `web_search`.
#[derive(Deserialize, JsonSchema)]
pub struct WebSearchArgs {
    /// The search query.
    pub query: String,
    /// Max results to return (default 5, max 20).
    #[serde(default)]
    pub max_results: Option<usize>,
    /// Search category: general (default), news, it (code/tech) or science.
    #[serde(default)]
    pub category: Option<String>,
}

fn validate(args: &WebSearchArgs) -> Result<(usize, &str), ToolError> {
    if args.query.trim().is_empty() {
        return Err(ToolError::new("Error: query must not be empty."));
    }
    let n = args.max_results.unwrap_or(5);
    if !(1..=MAX_RESULTS).contains(&n) {
        return Err(ToolError::new(format!(
            "Error: max_results must be between 1 and {MAX_RESULTS} (got {n})."
        )));
    }
    let category = args.category.as_deref().unwrap_or("general");
    if !matches!(category, "general" | "news" | "it" | "science") {
        return Err(ToolError::new(format!(
            "Error: category must be general, news, it or science (got {category:?})."
        )));
    }
    Ok((n, category))
}

fn backend() -> Result<url::Url, ToolError> {
    let Some(base) =
        turnstone_plugin_sdk::host::config("searxng_url").filter(|u| !u.trim().is_empty())
    else {
        return Err(ToolError::new(
            "Error: web_search has no search backend configured. Set [tools] searxng_url in config.toml (or TURNSTONE_SEARXNG_URL) to a SearxNG instance with the JSON format enabled.",
        ));
    };
    url::Url::parse(base.trim())
        .map_err(|e| ToolError::new(format!("Error: searxng_url {base:?} is not a URL: {e}")))
}

/// Formats SearxNG JSON results.
pub fn format_results(json: &Value, n: usize) -> String {
    let results = json["results"].as_array().cloned().unwrap_or_default();
    if results.is_empty() {
        return "No results.".into();
    }
    let mut out = String::new();
    for (i, r) in results.iter().take(n).enumerate() {
        let title = r["title"].as_str().unwrap_or("(untitled)");
        let url = r["url"].as_str().unwrap_or("");
        let snippet = r["content"].as_str().unwrap_or("").trim();
        out.push_str(&format!("{}. {title}\n   {url}\n", i + 1));
        if !snippet.is_empty() {
            out.push_str(&format!("   {snippet}\n"));
        }
    }
    out
}

/// `web_search`.
pub struct WebSearch;

impl Tool for WebSearch {
    type Args = WebSearchArgs;
    const NAME: &'static str = "web_search";
    const DESCRIPTION: &'static str =
        "Search the web and return ranked results with titles, URLs and snippets.";

    fn meta() -> ToolMeta {
        ToolMeta {
            task_agent: true,
            auto_approve: true,
            primary_key: Some("query"),
            ..ToolMeta::default()
        }
    }

    fn prepare(args: &WebSearchArgs, _ctx: &Context) -> Result<Preview, ToolError> {
        validate(args)?;
        Ok(Preview::auto(format!("web_search: {}", args.query)))
    }

    fn execute(args: WebSearchArgs, _ctx: &Context) -> Result<Output, ToolError> {
        let (n, category) = validate(&args)?;
        let mut url = backend()?;
        let path = format!("{}/search", url.path().trim_end_matches('/'));
        url.set_path(&path);
        url.query_pairs_mut()
            .append_pair("q", &args.query)
            .append_pair("format", "json")
            .append_pair("categories", category);
        let resp = Request::get(url.as_str())
            .header("accept", "application/json")
            .send()
            .map_err(|e| ToolError::new(format!("Error: search backend unreachable: {e}")))?;
        let status = resp.status;
        let body = resp
            .text()
            .map_err(|e| ToolError::new(format!("Error: search backend: {e}")))?;
        if status != 200 {
            return Err(ToolError::new(format!(
                "Error: search backend answered HTTP {status}: {}",
                body.chars().take(300).collect::<String>()
            )));
        }
        let json: Value = turnstone_plugin_sdk::serde_json::from_str(&body).map_err(|e| {
            ToolError::new(format!("Error: search backend did not return JSON ({e}); enable the json format in SearxNG's settings"))
        })?;
        Ok(format_results(&json, n).into())
    }
}
