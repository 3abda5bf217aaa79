//! `judge-llm`: the second tier of the intent judge. It asks a model
//! (`[judge] model`, else the session's) whether a call does what the user
//! asked and how much harm it could do, with a bounded prompt: the tool, its
//! arguments, its description, what its plugin may touch and the last
//! messages of the conversation, each cut to a budget. The host runs it in
//! the background while the approval card is shown (`judge_pending`) and
//! announces the verdict as `intent_verdict`.

pub mod prompt;

use turnstone_plugin_sdk::guard::{CallContext, Guard, Verdict};

/// The component.
pub struct LlmJudge;

impl Guard for LlmJudge {
    fn review_call(
        tool: &str,
        arguments: &str,
        context: &CallContext,
    ) -> Result<Option<Verdict>, String> {
        let user = prompt::user_prompt(tool, arguments, context);
        let reply =
            turnstone_plugin_sdk::model::complete(prompt::SYSTEM, &user, prompt::MAX_REPLY_TOKENS)
                .map_err(|e| turnstone_plugin_sdk::model::describe(&e))?;
        prompt::parse_verdict(&reply).map(Some)
    }
}

turnstone_plugin_sdk::register_guard!(LlmJudge);
