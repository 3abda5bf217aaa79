//! `output-guard`: scans what a tool returns before the model sees it, for
//! credentials (cloud keys, API tokens, private keys, JWTs, connection
//! strings with passwords) and for text written to steer the model (prompt
//! injection). The host turns findings into an `output_warning` event and,
//! with `[judge] redact_output = true`, replaces secrets before the model
//! sees them.

pub mod patterns;

use turnstone_plugin_sdk::guard::{Finding, Guard};

/// The component.
pub struct OutputGuard;

impl Guard for OutputGuard {
    fn review_output(_tool: &str, output: &str) -> Result<Vec<Finding>, String> {
        Ok(patterns::scan(output))
    }
}

turnstone_plugin_sdk::register_guard!(OutputGuard);
