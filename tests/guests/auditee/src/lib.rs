//! Test-only component for the capability audit: one call reads a file in
//! the workspace, fetches one URL and tries another, and says what happened
//! (the host's audit of the call is what the test checks).

use turnstone_plugin_sdk::http::Request;
use turnstone_plugin_sdk::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// A file to read.
    pub path: String,
    /// URLs to GET, in order.
    pub urls: Vec<String>,
}

pub struct Touch;

impl Tool for Touch {
    type Args = Args;
    const NAME: &'static str = "touch";
    const DESCRIPTION: &'static str = "Reads a file and fetches URLs.";

    fn meta() -> ToolMeta {
        ToolMeta {
            auto_approve: true,
            ..ToolMeta::default()
        }
    }

    fn execute(args: Args, ctx: &Context) -> Result<Output, ToolError> {
        let mut out = Vec::new();
        match std::fs::read_to_string(ctx.resolve(&args.path)) {
            Ok(t) => out.push(format!("read {} bytes", t.len())),
            Err(e) => out.push(format!("read failed: {e}")),
        }
        for url in &args.urls {
            match Request::get(url.clone()).send() {
                Ok(r) => out.push(format!("{url}: {}", r.status)),
                Err(e) => out.push(format!("{url}: {e:?}")),
            }
        }
        Ok(out.join("\n").into())
    }
}

register_tools!(Touch);
