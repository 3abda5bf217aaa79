//! Operations a front end submits to a session.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One piece of a user message besides its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InputPart {
    /// More text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, by stored attachment id or inline `data:` URL.
    Image {
        /// Attachment reference.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attachment_id: Option<String>,
        /// Inline `data:` URL.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
    },
}

/// The user's answer to an approval request.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct Decision {
    /// Run the batch.
    pub approved: bool,
    /// Also approve these tools for the rest of the session.
    #[serde(default)]
    pub always: bool,
    /// Text passed on to the model with the results.
    #[serde(default)]
    pub feedback: Option<String>,
}

impl Decision {
    /// A plain denial (what a cancelled or abandoned approval becomes).
    pub fn deny() -> Self {
        Self::default()
    }
}

/// Something a front end asks a session to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Op {
    /// A user message: starts a turn, or waits for the next tool-result seam
    /// when one is running.
    Send {
        /// The message.
        text: String,
        /// Images and extra text sent with it.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        parts: Vec<InputPart>,
        /// The client's id for this send (echoed in `user_turn`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_send_id: Option<String>,
        /// Who sent it (echoed as `sender`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sender: Option<String>,
        /// What the front end shows of attachments sent with it (echoed in
        /// `user_turn`; the content travels in `parts`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        #[schema(value_type = Vec<Object>)]
        attachments: Vec<serde_json::Value>,
    },
    /// Answers a pending approval: by cycle id, by one of its call ids, or
    /// (neither) the oldest.
    Approve {
        /// The cycle.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cycle_id: Option<String>,
        /// A call in the cycle.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// The answer.
        #[serde(flatten)]
        decision: Decision,
    },
    /// Stops the running turn; `force` also drops queued messages.
    Cancel {
        /// Drop queued messages too.
        #[serde(default)]
        force: bool,
    },
    /// Drops the last `turns` user messages and what followed them.
    Rewind {
        /// How many user messages.
        turns: usize,
    },
    /// Asks the model again for the last user message.
    Retry,
    /// Forgets the in-memory context.
    Clear,
    /// Summarizes the conversation now.
    Compact,
    /// Switches the model alias for the next turn.
    SetModel {
        /// The alias.
        alias: String,
    },
    /// Removes a message queued while a turn runs.
    Unqueue {
        /// Its id from `message_queued`.
        msg_id: String,
    },
    /// A notice for the conversation (a watch's result): it joins as a turn
    /// marked with `source` (announced as `system_turn`) and the model
    /// answers it at once when the session is idle — an idle workstream
    /// wakes — or after the running turn.
    Notice {
        /// The text the model sees.
        content: String,
        /// Who produced it (`watch`).
        source: String,
        /// Details for front ends.
        #[serde(default)]
        #[schema(value_type = Object)]
        meta: serde_json::Value,
    },
    /// Activates a skill for the next turns (`name: None` drops the active
    /// one); recorded with the workstream.
    UseSkill {
        /// The skill; `None` deactivates.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Its arguments by name.
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        arguments: std::collections::BTreeMap<String, String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ops_are_tagged_and_round_trip() {
        let cases = [
            (
                Op::Send {
                    text: "hi".into(),
                    parts: vec![InputPart::Image {
                        attachment_id: None,
                        url: Some("data:image/png;base64,AA".into()),
                    }],
                    client_send_id: Some("c1".into()),
                    sender: None,
                    attachments: Vec::new(),
                },
                json!({"type": "send", "text": "hi", "client_send_id": "c1",
                       "parts": [{"type": "image", "url": "data:image/png;base64,AA"}]}),
            ),
            (
                Op::Approve {
                    cycle_id: Some("ab".into()),
                    call_id: None,
                    decision: Decision {
                        approved: false,
                        always: false,
                        feedback: Some("use rg".into()),
                    },
                },
                json!({"type": "approve", "cycle_id": "ab", "approved": false,
                       "always": false, "feedback": "use rg"}),
            ),
            (
                Op::Cancel { force: true },
                json!({"type": "cancel", "force": true}),
            ),
            (
                Op::Rewind { turns: 2 },
                json!({"type": "rewind", "turns": 2}),
            ),
            (Op::Retry, json!({"type": "retry"})),
            (Op::Clear, json!({"type": "clear"})),
            (Op::Compact, json!({"type": "compact"})),
            (
                Op::SetModel {
                    alias: "local".into(),
                },
                json!({"type": "set_model", "alias": "local"}),
            ),
            (
                Op::Unqueue {
                    msg_id: "m1".into(),
                },
                json!({"type": "unqueue", "msg_id": "m1"}),
            ),
        ];
        for (op, want) in cases {
            assert_eq!(serde_json::to_value(&op).unwrap(), want, "{op:?}");
            let back: Op = serde_json::from_value(want).unwrap();
            assert_eq!(back, op);
        }
        // Defaults: an approval with only `approved`, a cancel without force.
        let op: Op = serde_json::from_value(json!({"type": "approve", "approved": true})).unwrap();
        assert_eq!(
            op,
            Op::Approve {
                cycle_id: None,
                call_id: None,
                decision: Decision {
                    approved: true,
                    ..Decision::default()
                }
            }
        );
        assert!(serde_json::from_value::<Op>(json!({"type": "explode"})).is_err());
    }
}
