//! What an adapter reports, turned into workstream operations.
//!
//! A platform user acts only as the Turnstone user their account is linked
//! to (`channel_users`), with that user's permissions; an unlinked user gets
//! a reply saying how to link, never access. Linking: a signed-in user asks
//! for a one-time code (`POST /v1/api/channels/link-code`) and sends
//! `link <code>` to the bot. A conversation (a DM, a thread, a channel
//! message that starts a thread) maps to one workstream through
//! `channel_routes`; only its owner may talk to it or answer its prompts.

use super::relay::{self, Target};
use super::{ChannelHub, RouteMode, RoutingRule};
use crate::auth::role_permissions;
use crate::manager::CreateOptions;
use sha2::Digest;
use std::sync::Arc;
use turnstone_protocol::{Decision, Op};
use turnstone_runtime::channel::{
    ApprovalAction, Command, CommandResult, Conversation, Decision as ButtonDecision, Inbound,
    InboundMessage, Post,
};
use turnstone_storage::prelude::*;

/// How long a link code is valid.
pub const LINK_CODE_TTL: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// What an unlinked user is told.
pub const UNLINKED_REPLY: &str = "I don't know who you are on Turnstone yet, so I can't act for you. \
Sign in to Turnstone and press \"Link chat account\" (or call `POST /v1/api/channels/link-code`), \
then send me `link <code>`.";

/// The namespace of a plugin's user links: the plugin's own name, which is
/// unique on a node (the platform an adapter claims is only displayed, so a
/// third-party plugin saying "discord" cannot act as linked Discord users).
fn platform(_hub: &ChannelHub, plugin: &str) -> String {
    plugin.to_string()
}

/// Hashes a link code as stored (case and dashes do not matter).
pub fn link_code_hash(code: &str) -> String {
    let norm: String = code
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_uppercase())
        .collect();
    hex::encode(sha2::Sha256::digest(norm.as_bytes()))
}

/// A fresh code: 8 characters without look-alikes, shown as `XXXX-XXXX`
/// (32 symbols, so the modulo is unbiased); `None` without randomness.
pub fn new_link_code() -> Option<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).ok()?;
    let s: String = bytes
        .iter()
        .map(|b| ALPHABET[(*b as usize) % ALPHABET.len()] as char)
        .collect();
    Some(format!("{}-{}", &s[..4], &s[4..]))
}

/// `link ABCD-EFGH` (optionally `/link` or `!link`) → the code.
fn parse_link(text: &str) -> Option<&str> {
    let t = text.trim();
    let rest = t
        .strip_prefix('/')
        .or_else(|| t.strip_prefix('!'))
        .unwrap_or(t);
    let (word, code) = rest.split_once(char::is_whitespace)?;
    if !word.eq_ignore_ascii_case("link") {
        return None;
    }
    let code = code.trim();
    let ok = (6..=16).contains(&code.len())
        && code.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    ok.then_some(code)
}

/// Handles one report of `plugin`'s adapter.
pub(crate) async fn handle(hub: Arc<ChannelHub>, plugin: String, event: Inbound) {
    let result = match event {
        Inbound::Message(m) => on_message(&hub, &plugin, m).await,
        Inbound::Action(a) => on_action(&hub, &plugin, a).await,
    };
    if let Err(e) = result {
        tracing::warn!(plugin = %plugin, "channel event failed: {e}");
    }
}

async fn reply(
    hub: &ChannelHub,
    plugin: &str,
    conversation: &Conversation,
    to: Option<&str>,
    text: &str,
) {
    let cmd = Command::Post(Post {
        conversation: conversation.clone(),
        text: text.to_string(),
        reply_to: to.map(String::from),
        start_thread: None,
    });
    if let Err(e) = hub.command(plugin, cmd).await {
        tracing::warn!(plugin, "channel reply failed: {e}");
    }
}

/// The linked user and their permissions.
async fn linked_user(
    hub: &ChannelHub,
    platform: &str,
    platform_user: &str,
) -> Result<Option<(User, Vec<&'static str>)>, StorageError> {
    let db = &hub.mgr.deps.db;
    let Some(user_id) = db.channel_user(platform, platform_user).await? else {
        return Ok(None);
    };
    let Some(user) = db.get_user(&user_id).await? else {
        return Ok(None);
    };
    let perms = role_permissions(&user.role).unwrap_or_default();
    Ok(Some((user, perms)))
}

fn thread_key(c: &Conversation) -> String {
    c.thread_id.clone().unwrap_or_default()
}

async fn on_message(hub: &Arc<ChannelHub>, plugin: &str, m: InboundMessage) -> Result<(), String> {
    let platform = platform(hub, plugin);
    let db = hub.mgr.deps.db.clone();
    let conv = m.conversation.clone();
    if let Some(code) = parse_link(&m.text) {
        let now = turnstone_storage::util::now();
        let text = match db
            .redeem_link_code(&link_code_hash(code), &now)
            .await
            .map_err(|e| e.to_string())?
        {
            Some(user_id) => {
                db.link_channel_user(&platform, &m.user_id, &user_id)
                    .await
                    .map_err(|e| e.to_string())?;
                let name = db
                    .get_user(&user_id)
                    .await
                    .ok()
                    .flatten()
                    .map_or(user_id.clone(), |u| u.username);
                tracing::info!(plugin, platform = %platform, user = %name, "chat account linked");
                format!("Linked: you act as Turnstone user **{name}** here now.")
            }
            None => "That link code is unknown or has expired. Create a new one and send `link <code>` again.".to_string(),
        };
        reply(hub, plugin, &conv, Some(&m.message_id), &text).await;
        return Ok(());
    }
    let rule = hub.settings.rule_for(plugin, &conv.channel_id).cloned();
    if !conv.direct && rule.as_ref().is_some_and(|r| r.mode == RouteMode::Ignore) {
        return Ok(());
    }
    let Some((user, perms)) = linked_user(hub, &platform, &m.user_id)
        .await
        .map_err(|e| e.to_string())?
    else {
        reply(hub, plugin, &conv, Some(&m.message_id), UNLINKED_REPLY).await;
        return Ok(());
    };
    if perms.is_empty() {
        reply(
            hub,
            plugin,
            &conv,
            Some(&m.message_id),
            "Your Turnstone role is read-only; it cannot send messages to workstreams.",
        )
        .await;
        return Ok(());
    }
    for s in &m.skipped_attachments {
        reply(
            hub,
            plugin,
            &conv,
            Some(&m.message_id),
            &format!("Attachment not taken: {s}"),
        )
        .await;
    }
    // One conversation at a time decides its route (two quick messages in a
    // new conversation must not make two workstreams).
    let lock = hub.conversation_lock(&format!(
        "{plugin}\u{0}{}\u{0}{}",
        conv.channel_id,
        thread_key(&conv)
    ));
    let _routing = lock.lock().await;
    let route = db
        .channel_route(plugin, &conv.channel_id, &thread_key(&conv))
        .await
        .map_err(|e| e.to_string())?;
    let (ws, target) = match route {
        Some(r) if r.user_id != user.user_id => {
            reply(hub, plugin, &conv, Some(&m.message_id),
                "This conversation belongs to another user's workstream; start your own by mentioning me in the channel or in a direct message.").await;
            return Ok(());
        }
        Some(r) => match hub.mgr.open(&r.ws_id, Some(&user.user_id)).await {
            Ok(ws) if !ws.is_closed() => (
                ws,
                Target {
                    plugin: plugin.to_string(),
                    conversation: conv.clone(),
                    reply_to: Some(m.message_id.clone()),
                    placeholder: None,
                },
            ),
            // Deleted or unloadable: the conversation starts a new one.
            _ => new_workstream(hub, plugin, &m, &user, &perms, rule.as_ref()).await?,
        },
        // A thread nobody routed (someone else's, or started by hand) and
        // every other new conversation start a workstream.
        None => new_workstream(hub, plugin, &m, &user, &perms, rule.as_ref()).await?,
    };
    drop(_routing);
    relay::ensure(hub, &ws, target.clone());
    let mut attachment_ids = Vec::new();
    for a in &m.attachments {
        if a.data.len() > hub.settings.max_attachment_bytes {
            reply(
                hub,
                plugin,
                &target.conversation,
                Some(&m.message_id),
                &format!(
                    "Attachment {} is larger than {} bytes; not taken.",
                    a.filename, hub.settings.max_attachment_bytes
                ),
            )
            .await;
            continue;
        }
        let state = hub_state(hub);
        match crate::routes::attachments::store(
            &state,
            &ws.core.ws_id,
            &user.user_id,
            Some(&a.filename),
            a.content_type.as_deref(),
            axum::body::Bytes::from(a.data.clone()),
        )
        .await
        {
            Ok(att) => attachment_ids.push(att.attachment_id),
            Err(e) => {
                reply(
                    hub,
                    plugin,
                    &target.conversation,
                    Some(&m.message_id),
                    &format!("Attachment {} not taken: {}", a.filename, e),
                )
                .await;
            }
        }
    }
    let text = if m.text.trim().is_empty() && !attachment_ids.is_empty() {
        "(see the attached files)".to_string()
    } else {
        m.text.clone()
    };
    if text.trim().is_empty() {
        return Ok(());
    }
    let state = hub_state(hub);
    let sent = crate::routes::ws::send_message(&state, &ws, &text, None, &attachment_ids)
        .await
        .map_err(|e| e.to_string())?;
    match sent {
        crate::routes::ws::Sent::Started { .. } => {}
        crate::routes::ws::Sent::Queued { .. } => {
            reply(
                hub,
                plugin,
                &target.conversation,
                Some(&m.message_id),
                "Queued: I'll read this at the next step of the current turn.",
            )
            .await;
        }
        crate::routes::ws::Sent::Full { .. } => {
            reply(
                hub,
                plugin,
                &target.conversation,
                Some(&m.message_id),
                "Too many messages are waiting; try again when the current turn ends.",
            )
            .await;
        }
        crate::routes::ws::Sent::Closed => {
            reply(
                hub,
                plugin,
                &target.conversation,
                Some(&m.message_id),
                "That workstream was just closed; send your message again to start a new one.",
            )
            .await;
        }
    }
    Ok(())
}

/// Creates a workstream for `m`'s conversation and routes the
/// conversation to it (a channel message first gets its own thread).
async fn new_workstream(
    hub: &Arc<ChannelHub>,
    plugin: &str,
    m: &InboundMessage,
    user: &User,
    perms: &[&'static str],
    rule: Option<&RoutingRule>,
) -> Result<(Arc<crate::workstream::Workstream>, Target), String> {
    if !perms.contains(&"workstreams.create") {
        reply(
            hub,
            plugin,
            &m.conversation,
            Some(&m.message_id),
            "Your Turnstone role may not start workstreams.",
        )
        .await;
        return Err(format!("user {} may not create workstreams", user.username));
    }
    let title: String = m
        .text
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(60)
        .collect();
    let name = if title.trim().is_empty() {
        "chat".to_string()
    } else {
        title.trim().to_string()
    };
    let (ws, _, _) = hub
        .mgr
        .create(
            Some(&user.user_id),
            CreateOptions {
                name: Some(name.clone()),
                model: rule.and_then(|r| r.model.clone()),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    let mut target = Target {
        plugin: plugin.to_string(),
        conversation: m.conversation.clone(),
        reply_to: Some(m.message_id.clone()),
        placeholder: None,
    };
    // A message in a channel (not a DM, not a thread) starts a thread: one
    // thread per workstream, unless the channel is routed as a whole.
    let whole_channel = rule.is_some_and(|r| r.mode == RouteMode::Channel);
    if !m.conversation.direct && m.conversation.thread_id.is_none() && !whole_channel {
        let cmd = Command::Post(Post {
            conversation: m.conversation.clone(),
            text: "⏳ Working on it…".into(),
            reply_to: Some(m.message_id.clone()),
            start_thread: Some(name),
        });
        match hub.command(plugin, cmd).await {
            Ok(CommandResult::Posted(p)) => {
                target.conversation = p.conversation;
                target.placeholder = Some(p.message_id);
                target.reply_to = None;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(plugin, "could not start a thread: {e}"),
        }
    }
    let route = ChannelRoute {
        plugin: plugin.to_string(),
        channel_id: target.conversation.channel_id.clone(),
        thread_id: thread_key(&target.conversation),
        ws_id: ws.core.ws_id.clone(),
        user_id: user.user_id.clone(),
        created: turnstone_storage::util::now(),
    };
    hub.mgr
        .deps
        .db
        .set_channel_route(&route)
        .await
        .map_err(|e| e.to_string())?;
    Ok((ws, target))
}

async fn on_action(hub: &Arc<ChannelHub>, plugin: &str, a: ApprovalAction) -> Result<(), String> {
    let platform = platform(hub, plugin);
    let conv = a.conversation.clone();
    let Some((user, perms)) = linked_user(hub, &platform, &a.user_id)
        .await
        .map_err(|e| e.to_string())?
    else {
        reply(hub, plugin, &conv, None, UNLINKED_REPLY).await;
        return Ok(());
    };
    let db = &hub.mgr.deps.db;
    let route = db
        .channel_route(plugin, &conv.channel_id, &thread_key(&conv))
        .await
        .map_err(|e| e.to_string())?;
    let Some(route) = route else {
        reply(
            hub,
            plugin,
            &conv,
            None,
            "This prompt's workstream is no longer routed here.",
        )
        .await;
        return Ok(());
    };
    if route.user_id != user.user_id || !perms.contains(&"tools.approve") {
        reply(
            hub,
            plugin,
            &conv,
            None,
            &format!(
                "Only the workstream's owner can answer this prompt ({} tried).",
                a.user_name
            ),
        )
        .await;
        return Ok(());
    }
    let Some(ws) = hub.mgr.get(&route.ws_id) else {
        reply(
            hub,
            plugin,
            &conv,
            None,
            "That workstream is not running any more; nothing to approve.",
        )
        .await;
        return Ok(());
    };
    let op = Op::Approve {
        cycle_id: Some(a.cycle_id.clone()),
        call_id: None,
        decision: Decision {
            approved: a.decision != ButtonDecision::Deny,
            always: a.decision == ButtonDecision::Always,
            feedback: a.feedback.clone().filter(|f| !f.trim().is_empty()),
        },
    };
    match ws.session.submit(op).await {
        Ok(turnstone_engine::runner::Ack::Resolved { cycle_id: Some(_) }) => {}
        _ => {
            reply(
                hub,
                plugin,
                &conv,
                None,
                "That prompt was already answered.",
            )
            .await;
        }
    }
    Ok(())
}

/// An `AppState` for the route helpers the bridge shares (attachments,
/// sends); they only use its storage.
fn hub_state(hub: &ChannelHub) -> crate::http::AppState {
    hub.state.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_commands_are_recognised_in_their_spellings() {
        assert_eq!(parse_link("link ABCD-EFGH"), Some("ABCD-EFGH"));
        assert_eq!(parse_link("  /link abcd-efgh "), Some("abcd-efgh"));
        assert_eq!(parse_link("!LINK ABCDEFGH"), Some("ABCDEFGH"));
        assert_eq!(parse_link("please link my account"), None);
        assert_eq!(parse_link("link ab"), None);
        assert_eq!(parse_link("link ABCD EFGH"), None);
    }

    #[test]
    fn codes_hash_the_same_whatever_the_case_or_dash() {
        assert_eq!(link_code_hash("abcd-efgh"), link_code_hash("ABCDEFGH"));
        assert_ne!(link_code_hash("ABCDEFGH"), link_code_hash("ABCDEFGJ"));
        let code = new_link_code().unwrap();
        assert_eq!(code.len(), 9);
        assert_eq!(&code[4..5], "-");
        assert!(code.chars().all(|c| c == '-'
            || (c.is_ascii_alphanumeric() && c.is_ascii_uppercase() || c.is_ascii_digit())));
    }
}
