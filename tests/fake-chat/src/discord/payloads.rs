//! Dispatch payloads: MESSAGE_CREATE (channels-wire.md A5) and
//! INTERACTION_CREATE (A8), plus the message objects REST returns (A7).

use super::{BOT_ID, BOT_NAME, Interaction, State};
use crate::http::iso_now;
use serde_json::{Value, json};

/// A MESSAGE_CREATE to inject with [`FakeDiscord::message_create`](crate::FakeDiscord::message_create).
#[derive(Debug, Clone)]
pub struct MessageSpec {
    /// Channel (or thread) id.
    pub channel_id: String,
    /// Guild id; `None` for a DM (then no `guild_id` and no `member`).
    pub guild_id: Option<String>,
    /// Channel type: 0 guild text, 1 DM, 11 public thread.
    pub channel_type: u8,
    /// Author user id.
    pub author_id: String,
    /// Author username (also used as `global_name`).
    pub author_name: String,
    /// Message text.
    pub content: String,
    /// Whether `mentions` lists the bot user.
    pub mentions_bot: bool,
    /// Attachments: `(filename, size, url, content_type)`.
    pub attachments: Vec<(String, u64, String, String)>,
}

impl MessageSpec {
    /// A message in guild text channel `channel_id` of `guild_id`.
    pub fn guild(
        channel_id: &str,
        guild_id: &str,
        author_id: &str,
        author_name: &str,
        content: &str,
    ) -> Self {
        Self {
            channel_id: channel_id.into(),
            guild_id: Some(guild_id.into()),
            channel_type: 0,
            author_id: author_id.into(),
            author_name: author_name.into(),
            content: content.into(),
            mentions_bot: false,
            attachments: Vec::new(),
        }
    }

    /// A direct message in DM channel `channel_id`.
    pub fn dm(channel_id: &str, author_id: &str, author_name: &str, content: &str) -> Self {
        Self {
            guild_id: None,
            channel_type: 1,
            ..Self::guild(channel_id, "", author_id, author_name, content)
        }
    }

    /// A message inside thread `thread_id` (channel type 11) of `guild_id`.
    pub fn thread(
        thread_id: &str,
        guild_id: &str,
        author_id: &str,
        author_name: &str,
        content: &str,
    ) -> Self {
        Self {
            channel_type: 11,
            ..Self::guild(thread_id, guild_id, author_id, author_name, content)
        }
    }
}

/// The bot as a message author.
pub(crate) fn bot_author() -> Value {
    json!({"id": BOT_ID, "username": BOT_NAME, "discriminator": "0",
           "global_name": null, "avatar": null, "bot": true})
}

/// A message object as REST returns it (the bot is the author).
pub(crate) fn bot_message(
    id: &str,
    channel_id: &str,
    content: &str,
    components: Value,
    embeds: Value,
) -> Value {
    json!({
        "id": id, "type": 0, "channel_id": channel_id, "content": content,
        "components": components, "embeds": embeds, "attachments": [],
        "author": bot_author(), "timestamp": iso_now(), "edited_timestamp": null,
        "tts": false, "pinned": false, "mentions": [], "mention_roles": [],
        "mention_everyone": false, "flags": 0,
    })
}

/// Builds the MESSAGE_CREATE `d` for `spec` with message id `id`, and
/// registers its channel and author name.
pub(crate) fn message_create(st: &mut State, id: &str, spec: &MessageSpec) -> Value {
    st.know_channel(
        &spec.channel_id,
        spec.channel_type,
        spec.guild_id.as_deref(),
    );
    st.usernames
        .insert(spec.author_id.clone(), spec.author_name.clone());
    let mut attachments = Vec::new();
    for (filename, size, url, content_type) in &spec.attachments {
        let aid = st.next_attachment;
        st.next_attachment += 1;
        attachments.push(json!({
            "id": aid.to_string(), "filename": filename, "size": size,
            "url": url, "proxy_url": url, "content_type": content_type,
        }));
    }
    let mentions = if spec.mentions_bot {
        json!([{"id": BOT_ID, "username": BOT_NAME, "discriminator": "0", "bot": true}])
    } else {
        json!([])
    };
    let author = json!({
        "id": spec.author_id, "username": spec.author_name, "discriminator": "0",
        "global_name": spec.author_name, "avatar": null,
    });
    let mut d = json!({
        "id": id, "channel_id": spec.channel_id, "channel_type": spec.channel_type,
        "type": 0, "content": spec.content, "tts": false, "pinned": false,
        "timestamp": iso_now(), "edited_timestamp": null, "flags": 0,
        "author": author, "mentions": mentions, "mention_roles": [],
        "mention_everyone": false, "embeds": [], "components": [],
        "attachments": attachments, "referenced_message": null,
    });
    if let Some(g) = &spec.guild_id {
        d["guild_id"] = json!(g);
        d["member"] = json!({"roles": [], "joined_at": "2023-01-01T00:00:00+00:00",
                             "deaf": false, "mute": false, "flags": 0});
    }
    d
}

/// The message an interaction refers to: the bot's posted message, else
/// an injected one, else a stub authored by the bot.
fn message_json(st: &State, channel_id: &str, message_id: &str) -> Value {
    if let Some(p) = st.posted.iter().find(|p| p.id == message_id) {
        return p.message.clone();
    }
    if let Some((_, m)) = st.injected.get(message_id) {
        return m.clone();
    }
    bot_message(message_id, channel_id, "", json!([]), json!([]))
}

/// Registers and dispatches an INTERACTION_CREATE of `kind` (3 component,
/// 5 modal submit) with `data`; returns `(id, token)`.
pub(crate) fn interaction(
    st: &mut State,
    kind: u8,
    channel_id: &str,
    guild_id: Option<&str>,
    message_id: Option<&str>,
    user_id: &str,
    data: Value,
) -> (String, String) {
    let default_kind = if guild_id.is_some() { 0 } else { 1 };
    let channel_kind = st
        .channels
        .get(channel_id)
        .map(|c| c.kind)
        .unwrap_or(default_kind);
    st.know_channel(channel_id, channel_kind, guild_id);
    let iid = st.next_interaction.to_string();
    st.next_interaction += 1;
    let token = format!("fake-interaction-token.{iid}.aW50ZXJhY3Rpb24");
    let username = st
        .usernames
        .get(user_id)
        .cloned()
        .unwrap_or_else(|| format!("user{user_id}"));
    let user = json!({"id": user_id, "username": username, "discriminator": "0",
                      "global_name": username, "avatar": null});
    let mut d = json!({
        "id": iid, "application_id": BOT_ID, "type": kind, "token": token, "version": 1,
        "channel_id": channel_id, "channel": {"id": channel_id, "type": channel_kind},
        "data": data, "app_permissions": "0", "locale": "en-US", "entitlements": [],
        "attachment_size_limit": 10_485_760,
    });
    match guild_id {
        Some(g) => {
            d["guild_id"] = json!(g);
            d["guild_locale"] = json!("en-US");
            d["member"] = json!({"user": user, "roles": [], "permissions": "0",
                                 "joined_at": "2023-01-01T00:00:00+00:00", "deaf": false, "mute": false});
            d["authorizing_integration_owners"] = json!({"0": g});
            d["context"] = json!(0);
        }
        None => {
            d["user"] = user;
            d["authorizing_integration_owners"] = json!({});
            d["context"] = json!(1);
        }
    }
    if let Some(mid) = message_id {
        d["message"] = message_json(st, channel_id, mid);
    }
    st.interactions.insert(
        iid.clone(),
        Interaction {
            token: token.clone(),
            channel_id: channel_id.to_string(),
            message_id: message_id.map(str::to_string),
            acked: false,
            callbacks: Vec::new(),
        },
    );
    st.dispatch("INTERACTION_CREATE", d);
    (iid, token)
}
