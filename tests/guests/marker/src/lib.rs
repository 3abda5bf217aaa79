//! Test-only component for hot-reload tests. `marker` answers with the marker
//! string compiled into this build; a test makes a "new version" by patching
//! `v1` to `v2` inside that string in the .wasm bytes (same length), so two
//! genuinely different components exist without a second build.

use turnstone_plugin_sdk::prelude::*;

/// Patched by tests: keep the exact text `MARKER-v1-` followed by the tag.
const MARKER: &str = "MARKER-v1-c0ffee7d";

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// Milliseconds to wait before answering (lets calls straddle a swap).
    #[serde(default)]
    pub sleep_ms: u64,
}

pub struct Marker;

impl Tool for Marker {
    type Args = Args;
    const NAME: &'static str = "marker";
    const DESCRIPTION: &'static str =
        "Returns the marker of the component version that served the call.";

    fn meta() -> ToolMeta {
        ToolMeta {
            auto_approve: true,
            ..ToolMeta::default()
        }
    }

    fn execute(args: Args, _ctx: &Context) -> Result<Output, ToolError> {
        if args.sleep_ms > 0 {
            turnstone_plugin_sdk::host::sleep_ms(args.sleep_ms);
        }
        Ok(std::hint::black_box(MARKER).to_string().into())
    }
}

register_tools!(Marker);
