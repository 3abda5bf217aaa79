//! # Turnstone plugin SDK
//!
//! Write a tool for Turnstone as a sandboxed WebAssembly component: implement
//! [`Tool`] for a type, list it in [`register_tools!`], and build with
//! `cargo build --release --target wasm32-wasip2`. The JSON Schema the model sees
//! is generated from your argument type (doc comments become descriptions).
//!
//! ```no_run
//! use turnstone_plugin_sdk::prelude::*;
//!
//! /// Arguments of `shout`.
//! #[derive(Deserialize, JsonSchema)]
//! struct ShoutArgs {
//!     /// Text to upper-case.
//!     text: String,
//!     /// How many exclamation marks to add.
//!     #[serde(default)]
//!     bangs: u8,
//! }
//!
//! struct Shout;
//!
//! impl Tool for Shout {
//!     type Args = ShoutArgs;
//!     const NAME: &'static str = "shout";
//!     const DESCRIPTION: &'static str = "Upper-cases text.";
//!
//!     fn meta() -> ToolMeta {
//!         ToolMeta { auto_approve: true, primary_key: Some("text"), ..ToolMeta::default() }
//!     }
//!
//!     fn execute(args: ShoutArgs, ctx: &Context) -> Result<Output, ToolError> {
//!         ctx.emit("shouting…");
//!         Ok(format!("{}{}", args.text.to_uppercase(), "!".repeat(args.bangs.into())).into())
//!     }
//! }
//!
//! register_tools!(Shout);
//! ```
//!
//! Next to the component ship a `plugin.toml` naming the plugin and the
//! capabilities it needs (see the repository README, "Write your own tool").
//! Everything outside those capabilities — files, network, processes, secrets —
//! is denied by the host with a [`CapabilityError`] explaining the grant needed.

pub mod agent;
pub mod channel;
mod delta_batch;
pub mod edits;
pub mod fs;
pub mod guard;
pub mod host;
pub mod http;
pub mod json_scan;
pub mod model;
pub mod process;
pub mod provider;
pub mod request_body;
pub mod served;
pub mod sse;
pub mod work;

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "tool-plugin",
        path: "../wit/v0.2.0",
        pub_export_macro: true,
        export_macro_name: "__export_tool_plugin",
        default_bindings_module: "turnstone_plugin_sdk::bindings",
        // The 0.2.0 world is mostly 0.1.0's interfaces (another package
        // version, so wit-bindgen wants them named or generated).
        generate_all,
    });
}

pub use schemars;
pub use serde;
pub use serde_json;

use bindings::exports::turnstone::plugin0_1_0::tool as wit;
use std::path::{Path, PathBuf};

/// A capability the host did not grant, with the exact grant that would allow it.
pub use bindings::turnstone::plugin0_1_0::types::CapabilityError;

/// Everything a tool author usually needs.
pub mod prelude {
    pub use crate::{Context, Image, Output, Preview, Tool, ToolError, ToolMeta, register_tools};
    pub use schemars::JsonSchema;
    pub use serde::Deserialize;
}

/// A readable sentence for a capability denial, including the grant hint.
pub fn describe_denial(e: &CapabilityError) -> String {
    let mut s = format!("{} denied: {}", e.capability, e.detail);
    if !e.grant_hint.is_empty() {
        s.push_str(&format!(" ({})", e.grant_hint));
    }
    s
}

/// Tool metadata beyond name, description and schema.
#[derive(Debug, Clone, Default)]
pub struct ToolMeta {
    /// Available to task sub-agents.
    pub task_agent: bool,
    /// Safe to run without approval (read-only, no side effects).
    pub auto_approve: bool,
    /// Parameter that a bare-string argument maps to.
    pub primary_key: Option<&'static str>,
    /// Available to coordinator sessions.
    pub coordinator: bool,
    /// With `coordinator`, also available to interactive sessions.
    pub interactive: bool,
    /// Per-kind overlays (JSON object), e.g. `{"coordinator": {"description": "…"}}`.
    pub kind_variants: Option<serde_json::Value>,
    /// Appended to the description with `{working_dir}` substituted.
    pub cwd_note: Option<&'static str>,
    /// Appended with `{workspace_dir}` substituted when a workspace is configured.
    pub workspace_note: Option<&'static str>,
}

/// The approval preview of a call.
#[derive(Debug, Clone)]
pub struct Preview {
    /// One line, e.g. `read_file: src/main.rs`.
    pub header: String,
    /// Optional longer body (a diff, a command).
    pub body: Option<String>,
    /// Whether the user must approve the call.
    pub needs_approval: bool,
}

impl Preview {
    /// A preview that asks for approval.
    pub fn ask(header: impl Into<String>) -> Self {
        Self {
            header: header.into(),
            body: None,
            needs_approval: true,
        }
    }

    /// A preview for a call that runs without approval.
    pub fn auto(header: impl Into<String>) -> Self {
        Self {
            header: header.into(),
            body: None,
            needs_approval: false,
        }
    }

    /// Adds a body.
    pub fn with_body(mut self, body: impl Into<String>) -> Self {
        self.body = Some(body.into());
        self
    }
}

/// An image returned to a vision-capable model.
#[derive(Debug, Clone)]
pub struct Image {
    /// IANA media type.
    pub media_type: String,
    /// Base64 data.
    pub data_base64: String,
}

/// A successful tool result.
#[derive(Debug, Clone, Default)]
pub struct Output {
    /// Text the model sees.
    pub text: String,
    /// Display-only payload for front ends.
    pub preview: Option<String>,
    /// Images for vision models.
    pub images: Vec<Image>,
}

impl From<String> for Output {
    fn from(text: String) -> Self {
        Self {
            text,
            ..Self::default()
        }
    }
}

impl From<&str> for Output {
    fn from(text: &str) -> Self {
        text.to_string().into()
    }
}

/// A failed tool call, shown to the model as an error result.
///
/// A message ([`ToolError::new`]) reaches the model as `Error: <message>`
/// with exactly one prefix, added here: a message that already starts with
/// `Error:` is not prefixed again. Failed *output* ([`ToolError::output`],
/// e.g. the transcript of a command that exited non-zero) is passed on as is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    text: String,
    verbatim: bool,
}

impl ToolError {
    /// An error with this message.
    pub fn new(msg: impl Into<String>) -> Self {
        Self {
            text: msg.into(),
            verbatim: false,
        }
    }

    /// A failed result whose text is the tool's output, sent unchanged.
    pub fn output(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            verbatim: true,
        }
    }

    /// The message (or output) as the tool gave it.
    pub fn message(&self) -> &str {
        &self.text
    }

    /// The text the model sees.
    pub fn into_text(self) -> String {
        if self.verbatim {
            self.text
        } else {
            error_text(&self.text)
        }
    }
}

impl<E: std::fmt::Display> From<E> for ToolError {
    fn from(e: E) -> Self {
        Self::new(e.to_string())
    }
}

/// `msg` with exactly one leading `Error: ` (repeated prefixes collapse).
pub fn error_text(msg: &str) -> String {
    let mut rest = msg.trim_start();
    while let Some(r) = rest
        .get(..6)
        .filter(|p| p.eq_ignore_ascii_case("error:"))
        .map(|_| rest[6..].trim_start())
    {
        rest = r;
    }
    format!("Error: {rest}")
}

/// The context of one call.
#[derive(Debug, Clone)]
pub struct Context {
    /// The model's tool-call id.
    pub call_id: String,
    /// The session (workstream) id.
    pub session_id: String,
    /// The configured workspace, if any.
    pub workspace_dir: Option<PathBuf>,
    /// Directory relative paths are resolved against.
    pub working_dir: PathBuf,
    /// The model accepts images.
    pub supports_vision: bool,
}

impl Context {
    fn from_wit(c: wit::CallContext) -> Self {
        Self {
            call_id: c.call_id,
            session_id: c.session_id,
            workspace_dir: c.workspace_dir.map(PathBuf::from),
            working_dir: PathBuf::from(c.working_dir),
            supports_vision: c.supports_vision,
        }
    }

    /// Resolves `path` against the working directory.
    pub fn resolve(&self, path: impl AsRef<Path>) -> PathBuf {
        let p = path.as_ref();
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.working_dir.join(p)
        }
    }

    /// Streams a chunk of output to the user while the tool runs. Returns false
    /// when the call was cancelled: stop and return promptly.
    pub fn emit(&self, chunk: &str) -> bool {
        bindings::turnstone::plugin0_1_0::tool_output::emit(chunk)
    }
}

/// One tool. Implement it for a unit struct and list the type in
/// [`register_tools!`].
pub trait Tool {
    /// Arguments, deserialised from the model's JSON. The JSON Schema sent to the
    /// model is generated from this type.
    type Args: serde::de::DeserializeOwned + schemars::JsonSchema;
    /// Tool name (`[A-Za-z0-9_-]{1,64}`).
    const NAME: &'static str;
    /// Description for the model.
    const DESCRIPTION: &'static str;

    /// Metadata; defaults to "needs approval, no primary key".
    fn meta() -> ToolMeta {
        ToolMeta::default()
    }

    /// Validates the call and builds the approval preview. The default asks for
    /// approval unless [`ToolMeta::auto_approve`] is set.
    fn prepare(_args: &Self::Args, _ctx: &Context) -> Result<Preview, ToolError> {
        let header = Self::NAME.to_string();
        Ok(if Self::meta().auto_approve {
            Preview::auto(header)
        } else {
            Preview::ask(header)
        })
    }

    /// Runs the call.
    fn execute(args: Self::Args, ctx: &Context) -> Result<Output, ToolError>;
}

/// The JSON Schema of `T` as tools present it: inline (no `$ref`), without
/// `$schema`/`title`.
pub fn schema_for<T: schemars::JsonSchema>() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft07()
        .with(|s| {
            s.inline_subschemas = true;
        })
        .into_generator();
    let schema = generator.into_root_schema_for::<T>();
    let mut value = schema.to_value();
    if let Some(obj) = value.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
        obj.remove("definitions");
    }
    value
}

#[doc(hidden)]
pub mod __private {
    use super::*;
    pub use bindings::exports::turnstone::plugin0_1_0::tool::{
        CallContext, Guest, Preview as WitPreview, ToolResult, ToolSpec,
    };

    fn parse<T: Tool>(arguments: &str) -> Result<T::Args, String> {
        let text = if arguments.trim().is_empty() {
            "{}"
        } else {
            arguments
        };
        serde_json::from_str(text).map_err(|e| format!("invalid arguments for {}: {e}", T::NAME))
    }

    pub fn spec<T: Tool>() -> ToolSpec {
        let meta = T::meta();
        ToolSpec {
            name: T::NAME.to_string(),
            description: T::DESCRIPTION.to_string(),
            parameters: schema_for::<T::Args>().to_string(),
            task_agent: meta.task_agent,
            auto_approve: meta.auto_approve,
            primary_key: meta.primary_key.map(str::to_string),
            coordinator: meta.coordinator,
            interactive: meta.interactive,
            kind_variants: meta.kind_variants.map(|v| v.to_string()),
            cwd_note: meta.cwd_note.map(str::to_string),
            workspace_note: meta.workspace_note.map(str::to_string),
        }
    }

    pub fn prepare<T: Tool>(arguments: &str, ctx: CallContext) -> Result<WitPreview, String> {
        let args = parse::<T>(arguments).map_err(|e| error_text(&e))?;
        let p = T::prepare(&args, &Context::from_wit(ctx)).map_err(ToolError::into_text)?;
        Ok(WitPreview {
            header: p.header,
            body: p.body,
            needs_approval: p.needs_approval,
        })
    }

    pub fn execute<T: Tool>(arguments: &str, ctx: CallContext) -> ToolResult {
        let result = parse::<T>(arguments)
            .map_err(ToolError::new)
            .and_then(|args| T::execute(args, &Context::from_wit(ctx)));
        match result {
            Ok(out) => ToolResult {
                output: out.text,
                is_error: false,
                preview: out.preview,
                images: out
                    .images
                    .into_iter()
                    .map(|i| bindings::turnstone::plugin0_1_0::types::ImageData {
                        media_type: i.media_type,
                        data_base64: i.data_base64,
                    })
                    .collect(),
            },
            Err(e) => ToolResult {
                output: e.into_text(),
                is_error: true,
                preview: None,
                images: Vec::new(),
            },
        }
    }

    pub fn unknown(tool: &str) -> String {
        error_text(&format!("this plugin has no tool named {tool:?}"))
    }
}

/// Exports the listed [`Tool`] types as this component's tools.
///
/// One invocation per component, listing every tool type, e.g.
/// `register_tools!(ReadFile, WriteFile);` (see the crate-level example).
#[macro_export]
macro_rules! register_tools {
    ($($tool:ty),+ $(,)?) => {
        #[doc(hidden)]
        pub struct __TurnstoneTools;

        impl $crate::__private::Guest for __TurnstoneTools {
            fn describe() -> ::std::vec::Vec<$crate::__private::ToolSpec> {
                ::std::vec![$($crate::__private::spec::<$tool>()),+]
            }

            fn prepare(
                tool: ::std::string::String,
                arguments: ::std::string::String,
                ctx: $crate::__private::CallContext,
            ) -> ::std::result::Result<$crate::__private::WitPreview, ::std::string::String> {
                $(
                    if tool == <$tool as $crate::Tool>::NAME {
                        return $crate::__private::prepare::<$tool>(&arguments, ctx);
                    }
                )+
                ::std::result::Result::Err($crate::__private::unknown(&tool))
            }

            fn execute(
                tool: ::std::string::String,
                arguments: ::std::string::String,
                ctx: $crate::__private::CallContext,
            ) -> $crate::__private::ToolResult {
                $(
                    if tool == <$tool as $crate::Tool>::NAME {
                        return $crate::__private::execute::<$tool>(&arguments, ctx);
                    }
                )+
                $crate::__private::ToolResult {
                    output: $crate::__private::unknown(&tool),
                    is_error: true,
                    preview: ::std::option::Option::None,
                    images: ::std::vec::Vec::new(),
                }
            }
        }

        $crate::bindings::__export_tool_plugin!(__TurnstoneTools with_types_in $crate::bindings);
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Test args.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Args {
        /// The path.
        path: String,
        /// Optional count.
        limit: Option<u32>,
        nested: Inner,
    }

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Inner {
        flag: bool,
    }

    #[test]
    fn schema_is_inline_and_follows_the_rust_type() {
        let s = schema_for::<Args>();
        assert_eq!(s["type"], "object");
        assert_eq!(s["properties"]["path"]["type"], "string");
        assert_eq!(s["properties"]["path"]["description"], "The path.");
        assert_eq!(
            s["properties"]["nested"]["properties"]["flag"]["type"],
            "boolean"
        );
        let required: Vec<&str> = s["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(required.contains(&"path") && required.contains(&"nested"));
        assert!(!required.contains(&"limit"));
        assert!(s.get("$schema").is_none() && s.get("title").is_none());
        assert!(!s.to_string().contains("$ref"));
    }

    #[test]
    fn error_messages_carry_exactly_one_prefix() {
        assert_eq!(
            error_text("file not found: /a"),
            "Error: file not found: /a"
        );
        assert_eq!(error_text("Error: x"), "Error: x");
        assert_eq!(error_text("Error: Error:  x"), "Error: x");
        assert_eq!(error_text("  error: x"), "Error: x");
        assert_eq!(error_text("Errors: x"), "Error: Errors: x");
        assert_eq!(ToolError::new("Error: bad").into_text(), "Error: bad");
        assert_eq!(ToolError::new("bad").into_text(), "Error: bad");
        assert_eq!(
            ToolError::output("ls: no such file\n[exit code 2]").into_text(),
            "ls: no such file\n[exit code 2]"
        );
        let from: ToolError = std::io::Error::other("disk full").into();
        assert_eq!(from.message(), "disk full");
        assert_eq!(from.into_text(), "Error: disk full");
    }
}
