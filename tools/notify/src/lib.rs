//! Built-in `notify`: sends a short notification to the caller's targets —
//! webhooks (an HTTP POST of JSON, through this plugin's egress grants, a
//! target's secret by reference as a bearer token), and chat channels
//! through the host. Auto-approved (notifications are time-sensitive), and
//! rate-limited per session.

use turnstone_plugin_sdk::host;
use turnstone_plugin_sdk::http::{HttpError, Request};
use turnstone_plugin_sdk::prelude::*;
use turnstone_plugin_sdk::serde_json::json;
use turnstone_plugin_sdk::work::notify::{self, Notification, Target, TargetKind};

/// Longest message.
const MAX_MESSAGE: usize = 2000;
/// Notifications a session may send per window.
const RATE_LIMIT: usize = 5;
/// The window, in milliseconds.
const RATE_WINDOW_MS: u64 = 10 * 60 * 1000;
/// Waits before the second and third attempt of a failed webhook.
const RETRY_WAITS_MS: [u64; 2] = [1000, 3000];

/// Arguments of `notify`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct NotifyArgs {
    /// The notification (plain text, at most 2000 characters).
    pub message: String,
    /// A short title, shown before the message.
    #[serde(default)]
    pub title: Option<String>,
    /// Send only to this target (by name); default: every target.
    #[serde(default)]
    pub target: Option<String>,
}

fn check(args: &NotifyArgs) -> Result<(), ToolError> {
    if args.message.trim().is_empty() {
        return Err(ToolError::new("`message` must not be empty"));
    }
    if args.message.chars().count() > MAX_MESSAGE {
        return Err(ToolError::new(format!(
            "`message` is longer than {MAX_MESSAGE} characters"
        )));
    }
    Ok(())
}

/// Send times of this session within the window (kept in the plugin's store).
fn recent(session: &str, now: u64) -> Vec<u64> {
    host::kv_get(&format!("sent\u{0}{session}"))
        .and_then(|b| String::from_utf8(b).ok())
        .map(|s| {
            s.split(',')
                .filter_map(|t| t.parse::<u64>().ok())
                .filter(|t| now.saturating_sub(*t) < RATE_WINDOW_MS)
                .collect()
        })
        .unwrap_or_default()
}

fn remember(session: &str, mut times: Vec<u64>, now: u64) {
    times.push(now);
    let text: Vec<String> = times.iter().map(u64::to_string).collect();
    let _ = host::kv_set(&format!("sent\u{0}{session}"), text.join(",").as_bytes());
}

/// POSTs the notification to a webhook; retries a failure twice.
fn post(target: &Target, body: &str) -> Result<u16, String> {
    let url = target
        .url
        .clone()
        .ok_or_else(|| "the webhook target has no url".to_string())?;
    let mut last = String::new();
    for attempt in 0..=RETRY_WAITS_MS.len() {
        if attempt > 0 && !host::sleep_ms(RETRY_WAITS_MS[attempt - 1]) {
            return Err("cancelled".into());
        }
        let mut req = Request::post(url.clone(), body.as_bytes().to_vec())
            .header("content-type", "application/json")
            .header("user-agent", "turnstone-notify");
        if let Some(secret) = &target.secret {
            req = req.bearer_secret(secret).map_err(|e| e.to_string())?;
        }
        match req.send() {
            Ok(r) if (200..300).contains(&r.status) => return Ok(r.status),
            // A client error will not change on retry.
            Ok(r) if (400..500).contains(&r.status) && r.status != 429 => {
                return Err(format!("the webhook answered HTTP {}", r.status));
            }
            Ok(r) => last = format!("the webhook answered HTTP {}", r.status),
            // A denied host or secret will not change on retry either.
            Err(HttpError::Denied(e)) => {
                return Err(format!(
                    "{} (a webhook on a private host, or one that gets a secret, must be granted to the notify plugin by name)",
                    turnstone_plugin_sdk::describe_denial(&e)
                ));
            }
            Err(e @ HttpError::InvalidUrl(_)) => return Err(e.to_string()),
            Err(e) => last = e.to_string(),
        }
    }
    Err(format!(
        "{last} (after {} attempts)",
        RETRY_WAITS_MS.len() + 1
    ))
}

/// `notify`.
pub struct Notify;

impl Tool for Notify {
    type Args = NotifyArgs;
    const NAME: &'static str = "notify";
    const DESCRIPTION: &'static str = "Send a short notification (title and message) to the user's configured targets, such as a webhook or a chat channel, to alert them when something needs attention or a long task is done. Give `target` to send to one of them by name.";

    fn meta() -> ToolMeta {
        ToolMeta {
            auto_approve: true,
            task_agent: true,
            primary_key: Some("message"),
            ..ToolMeta::default()
        }
    }

    fn prepare(args: &NotifyArgs, _ctx: &Context) -> Result<Preview, ToolError> {
        check(args)?;
        let to = args.target.as_deref().unwrap_or("every target");
        Ok(Preview::auto(format!(
            "notify {to}: {}",
            args.title.as_deref().unwrap_or(&args.message)
        )))
    }

    fn execute(args: NotifyArgs, ctx: &Context) -> Result<Output, ToolError> {
        check(&args)?;
        let mut targets = notify::targets().map_err(|e| ToolError::new(e.to_string()))?;
        if let Some(name) = &args.target {
            targets.retain(|t| &t.name == name);
            if targets.is_empty() {
                return Err(ToolError::new(format!(
                    "no notification target named {name:?}"
                )));
            }
        }
        if targets.is_empty() {
            return Err(ToolError::new(
                "no notification targets are configured for this user or workstream (add one with POST /v1/api/notify-targets)",
            ));
        }
        let now = host::now_ms();
        let sent = recent(&ctx.session_id, now);
        if sent.len() >= RATE_LIMIT {
            return Err(ToolError::new(format!(
                "at most {RATE_LIMIT} notifications per 10 minutes in a session; this one was not sent"
            )));
        }
        // The session id is the workstream's (empty outside one).
        let workstream_id = Some(ctx.session_id.clone()).filter(|s| !s.is_empty());
        let body = json!({
            "title": args.title,
            "message": args.message,
            "workstream_id": workstream_id,
            "source": "turnstone",
        })
        .to_string();
        let mut lines = Vec::new();
        let mut delivered = 0;
        for t in &targets {
            let r = match t.kind {
                TargetKind::Webhook => post(t, &body).map(|s| format!("HTTP {s}")),
                TargetKind::Channel => notify::deliver(
                    &t.name,
                    &Notification {
                        title: args.title.clone(),
                        message: args.message.clone(),
                        workstream_id: workstream_id.clone(),
                    },
                )
                .map(|id| format!("delivery {id}"))
                .map_err(|e| e.to_string()),
            };
            match r {
                Ok(how) => {
                    delivered += 1;
                    lines.push(format!("Delivered to {} ({how}).", t.name));
                }
                Err(e) => lines.push(format!("Not delivered to {}: {e}", t.name)),
            }
        }
        if delivered > 0 {
            remember(&ctx.session_id, sent, now);
            Ok(lines.join("\n").into())
        } else {
            Err(ToolError::new(lines.join("\n")))
        }
    }
}

register_tools!(Notify);
