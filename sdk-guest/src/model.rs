//! Asking the calling session's model (requires the `model` capability).

use crate::bindings::turnstone::plugin0_1_0::model as wm;

pub use wm::ModelError;

/// A readable sentence for a model error (the generated type has its own
/// terse `Display`).
pub fn describe(e: &ModelError) -> String {
    match e {
        ModelError::Denied(d) => crate::describe_denial(d),
        ModelError::Unavailable(m) => format!("no model available: {m}"),
        ModelError::Failed(m) => format!("model call failed: {m}"),
    }
}

/// One tool-less completion: the model's reply to `prompt` under `system`.
pub fn complete(system: &str, prompt: &str, max_tokens: u32) -> Result<String, ModelError> {
    wm::complete(system, prompt, max_tokens)
}
