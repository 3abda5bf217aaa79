//! Writing safety guards: implement [`Guard`] and call
//! [`register_guard!`](crate::register_guard). A guard reviews tool calls
//! before they are approved (an intent judge) and tool output before the
//! model sees it (an output guard); the manifest's `[guard] reviews` says
//! which of the two the host asks it for.

/// Generated bindings of the guard world (imports shared with the tool world).
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "guard-plugin",
        path: "../wit/v0.2.0",
        pub_export_macro: true,
        export_macro_name: "__export_guard_plugin",
        default_bindings_module: "turnstone_plugin_sdk::guard::bindings",
        with: {
            "turnstone:plugin/types@0.1.0": crate::bindings::turnstone::plugin0_1_0::types,
            "turnstone:plugin/log@0.1.0": crate::bindings::turnstone::plugin0_1_0::log,
            "turnstone:plugin/config@0.1.0": crate::bindings::turnstone::plugin0_1_0::config,
            "turnstone:plugin/process@0.1.0": crate::bindings::turnstone::plugin0_1_0::process,
            "turnstone:plugin/kv@0.1.0": crate::bindings::turnstone::plugin0_1_0::kv,
            "turnstone:plugin/clock@0.1.0": crate::bindings::turnstone::plugin0_1_0::clock,
            "turnstone:plugin/model@0.1.0": crate::bindings::turnstone::plugin0_1_0::model,
            "turnstone:plugin/session-info@0.2.0": crate::bindings::turnstone::plugin0_2_0::session_info,
            "turnstone:plugin/memory@0.2.0": crate::bindings::turnstone::plugin0_2_0::memory,
            "turnstone:plugin/history@0.2.0": crate::bindings::turnstone::plugin0_2_0::history,
            "turnstone:plugin/skills@0.2.0": crate::bindings::turnstone::plugin0_2_0::skills,
            "turnstone:plugin/agents@0.2.0": crate::bindings::turnstone::plugin0_2_0::agents,
            "turnstone:plugin/watches@0.2.0": crate::bindings::turnstone::plugin0_2_0::watches,
            "turnstone:plugin/notify-targets@0.2.0": crate::bindings::turnstone::plugin0_2_0::notify_targets,
            "turnstone:plugin/preview@0.2.0": crate::bindings::turnstone::plugin0_2_0::preview,
        },
    });
}

pub use bindings::exports::turnstone::plugin0_2_0::guard::{
    CallContext, Finding, FindingKind, Recommendation, Risk, Verdict,
};

/// A safety guard. Both reviews default to "no opinion", so a guard
/// implements only the one its manifest names.
pub trait Guard {
    /// Reviews `tool` called with `arguments` (JSON text) before approval;
    /// `Ok(None)` when the guard has no opinion. An error is logged by the
    /// host and the call goes on without this guard's verdict.
    fn review_call(
        tool: &str,
        arguments: &str,
        context: &CallContext,
    ) -> Result<Option<Verdict>, String> {
        let _ = (tool, arguments, context);
        Ok(None)
    }

    /// Reviews `tool`'s output before the model sees it.
    fn review_output(tool: &str, output: &str) -> Result<Vec<Finding>, String> {
        let _ = (tool, output);
        Ok(Vec::new())
    }
}

impl Risk {
    /// The wire name (`low`, `medium`, `high`, `critical`).
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
            Risk::Critical => "critical",
        }
    }

    /// Parses a wire name (case-insensitive).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "low" => Some(Risk::Low),
            "medium" => Some(Risk::Medium),
            "high" => Some(Risk::High),
            "critical" => Some(Risk::Critical),
            _ => None,
        }
    }

    /// Orders risks (low = 0 … critical = 3).
    pub fn rank(self) -> u8 {
        self as u8
    }
}

impl Recommendation {
    /// The wire name (`approve`, `review`, `deny`).
    pub fn as_str(self) -> &'static str {
        match self {
            Recommendation::Approve => "approve",
            Recommendation::Review => "review",
            Recommendation::Deny => "deny",
        }
    }

    /// Parses a wire name (case-insensitive).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "approve" => Some(Recommendation::Approve),
            "review" => Some(Recommendation::Review),
            "deny" => Some(Recommendation::Deny),
            _ => None,
        }
    }
}

#[doc(hidden)]
pub mod __private {
    pub use super::bindings::exports::turnstone::plugin0_2_0::guard::Guest;
}

/// Exports a [`Guard`] implementation as this component's guard.
#[macro_export]
macro_rules! register_guard {
    ($guard:ty) => {
        #[doc(hidden)]
        pub struct __TurnstoneGuard;

        impl $crate::guard::__private::Guest for __TurnstoneGuard {
            fn review_call(
                tool: ::std::string::String,
                arguments: ::std::string::String,
                context: $crate::guard::CallContext,
            ) -> ::std::result::Result<
                ::std::option::Option<$crate::guard::Verdict>,
                ::std::string::String,
            > {
                <$guard as $crate::guard::Guard>::review_call(&tool, &arguments, &context)
            }

            fn review_output(
                tool: ::std::string::String,
                output: ::std::string::String,
            ) -> ::std::result::Result<
                ::std::vec::Vec<$crate::guard::Finding>,
                ::std::string::String,
            > {
                <$guard as $crate::guard::Guard>::review_output(&tool, &output)
            }
        }

        $crate::guard::bindings::__export_guard_plugin!(
            __TurnstoneGuard with_types_in $crate::guard::bindings
        );
    };
}
