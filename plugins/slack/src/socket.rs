//! The Socket Mode link and the adapter's main loop: open a connection URL
//! with `apps.connections.open`, connect, ack and handle envelopes, carry out
//! host commands, and reconnect with backoff.

use crate::adapter::Adapter;
use crate::events::{FrameKind, ack_frame, classify};
use crate::util::Backoff;
use crate::web::{APP_TOKEN, ApiError};
use turnstone_plugin_sdk::channel::{
    LinkState, Message, Socket, Wake, WsError, connect, set_state, wait,
};
use turnstone_plugin_sdk::host::now_ms;

/// The longest `wait` when nothing is scheduled.
pub const IDLE_WAIT_MS: u64 = 30_000;

/// Why opening the link failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenError {
    /// Retrying cannot help (rejected token, missing grant).
    Fatal(String),
    /// Try again after at least `min_delay_ms`.
    Retry {
        /// What went wrong.
        reason: String,
        /// A lower bound for the next attempt (Slack's `Retry-After`).
        min_delay_ms: u64,
    },
}

/// The `wait` timeout: until the next queued call or reconnect, at least
/// 1 ms and at most [`IDLE_WAIT_MS`].
pub fn wait_timeout(now: u64, next_job: Option<u64>, reconnect_at: Option<u64>) -> u32 {
    let next = [next_job, reconnect_at].into_iter().flatten().min();
    let ms = next.map_or(IDLE_WAIT_MS, |t| {
        t.saturating_sub(now).clamp(1, IDLE_WAIT_MS)
    });
    u32::try_from(ms).unwrap_or(u32::MAX)
}

/// The host of a URL, for logs (the query holds a connection ticket).
pub fn url_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split(['/', '?']).next().unwrap_or(rest)
}

fn describe_ws(e: &WsError) -> String {
    match e {
        WsError::Denied(d) => turnstone_plugin_sdk::describe_denial(d),
        WsError::ConnectFailed(m) => format!("connect failed: {m}"),
        WsError::Closed(Some(f)) => format!("closed ({} {})", f.code, f.reason),
        WsError::Closed(None) => "closed".into(),
        WsError::Protocol(m) => format!("protocol error: {m}"),
    }
}

/// Learns the bot's user id if needed, fetches a fresh Socket Mode URL and
/// connects to it.
pub fn open(ad: &mut Adapter) -> Result<Socket, OpenError> {
    if ad.bot_user.is_none()
        && let Err(e) = ad.learn_bot_user()
    {
        if e.is_fatal() {
            return Err(OpenError::Fatal(format!(
                "Slack rejected the bot token: {e}"
            )));
        }
        crate::warn(&format!(
            "auth.test failed ({e}); bot mentions are matched by event type only"
        ));
    }
    let answer = match ad.web.call_form("apps.connections.open", APP_TOKEN, "") {
        Ok(v) => v,
        Err(e) if e.is_fatal() => {
            return Err(OpenError::Fatal(format!(
                "Slack rejected the app token: {e}"
            )));
        }
        Err(ApiError::RateLimited { retry_after_ms }) => {
            return Err(OpenError::Retry {
                reason: "apps.connections.open is rate-limited".into(),
                min_delay_ms: retry_after_ms,
            });
        }
        Err(e) => {
            return Err(OpenError::Retry {
                reason: format!("apps.connections.open failed: {e}"),
                min_delay_ms: 0,
            });
        }
    };
    let Some(url) = crate::events::str_at(&answer, "url") else {
        return Err(OpenError::Retry {
            reason: "apps.connections.open answered without a url".into(),
            min_delay_ms: 0,
        });
    };
    match connect(url, &[]) {
        Ok(socket) => {
            crate::info(&format!(
                "connected to Slack Socket Mode at {}",
                url_host(url)
            ));
            Ok(socket)
        }
        Err(e @ WsError::Denied(_)) => Err(OpenError::Fatal(describe_ws(&e))),
        Err(e) => Err(OpenError::Retry {
            reason: format!(
                "Socket Mode connection to {}: {}",
                url_host(url),
                describe_ws(&e)
            ),
            min_delay_ms: 0,
        }),
    }
}

/// The Socket Mode link: the open socket, or when to try again.
#[derive(Default)]
struct Link {
    socket: Option<Socket>,
    reconnect_at: Option<u64>,
    backoff: Backoff,
}

impl Link {
    /// Drops the socket (closing it if `close`) and schedules a reconnect.
    fn lost(&mut self, detail: &str, close: bool, min_delay_ms: u64) {
        if let Some(s) = self.socket.take()
            && close
        {
            s.close(1000, "reconnecting");
        }
        let delay = self.backoff.next_delay().max(min_delay_ms);
        crate::warn(&format!("{detail}; reconnecting in {delay} ms"));
        set_state(LinkState::Reconnecting, detail);
        self.reconnect_at = Some(now_ms().saturating_add(delay));
    }

    /// Opens a new connection now and swaps it in (the old one, if any,
    /// is closed once the new one is up or the attempt failed).
    fn reopen(&mut self, ad: &mut Adapter) -> Result<(), String> {
        self.reconnect_at = None;
        match open(ad) {
            Ok(new) => {
                if let Some(old) = self.socket.replace(new) {
                    old.close(1000, "reconnecting");
                }
                Ok(())
            }
            Err(OpenError::Fatal(e)) => {
                if let Some(old) = self.socket.take() {
                    old.close(1000, "stopping");
                }
                crate::warn(&e);
                set_state(LinkState::Failed, &e);
                Err(e)
            }
            Err(OpenError::Retry {
                reason,
                min_delay_ms,
            }) => {
                self.lost(&reason, true, min_delay_ms);
                Ok(())
            }
        }
    }
}

/// Serves Slack until the host says stop (`Ok`) or the link fails for good.
pub fn run(ad: &mut Adapter) -> Result<(), String> {
    set_state(LinkState::Connecting, "opening a Socket Mode connection");
    let mut link = Link {
        reconnect_at: Some(0),
        ..Link::default()
    };
    loop {
        if link.socket.is_none() && link.reconnect_at.is_some_and(|t| t <= now_ms()) {
            link.reopen(ad)?;
        }
        ad.pump();
        let now = now_ms();
        let reconnect_at = link.socket.is_none().then_some(link.reconnect_at).flatten();
        let timeout = wait_timeout(now, ad.next_due(now), reconnect_at);
        match wait(link.socket.as_ref(), timeout) {
            Wake::Socket(Message::Text(text)) => on_frame(ad, &mut link, &text)?,
            Wake::Socket(Message::Binary(_)) => {}
            Wake::Socket(Message::Close(frame)) => {
                let detail = match frame {
                    Some(f) => format!("Socket Mode connection closed ({} {})", f.code, f.reason),
                    None => "Socket Mode connection dropped".to_string(),
                };
                link.lost(&detail, false, 0);
            }
            Wake::Command((id, cmd)) => ad.on_command(id, cmd),
            Wake::Timeout => {}
            Wake::Stop => {
                if let Some(s) = link.socket.take() {
                    s.close(1000, "stopping");
                }
                crate::info("Slack adapter stopped");
                return Ok(());
            }
        }
    }
}

/// Acks an envelope first, then handles the frame.
fn on_frame(ad: &mut Adapter, link: &mut Link, text: &str) -> Result<(), String> {
    let frame = match classify(text) {
        Ok(f) => f,
        Err(e) => {
            crate::warn(&e);
            return Ok(());
        }
    };
    let mut ack_failed = None;
    if let Some(envelope) = &frame.envelope_id {
        if let Some(socket) = &link.socket
            && let Err(e) = socket.send_text(&ack_frame(envelope))
        {
            ack_failed = Some(format!(
                "could not ack a Slack envelope: {}",
                describe_ws(&e)
            ));
        }
        if !ad.seen.insert(&format!("env:{envelope}")) {
            lose_if(link, ack_failed);
            return Ok(());
        }
    }
    match frame.kind {
        FrameKind::Hello => {
            link.backoff.reset();
            crate::info("Slack Socket Mode link is up");
            set_state(LinkState::Connected, "Socket Mode connected");
        }
        FrameKind::Disconnect(reason) if reason == "link_disabled" => {
            if let Some(s) = link.socket.take() {
                s.close(1000, "link disabled");
            }
            let e = "Slack disabled the Socket Mode link".to_string();
            crate::warn(&e);
            set_state(LinkState::Failed, &e);
            return Err(e);
        }
        FrameKind::Disconnect(reason) => {
            crate::info(&format!("Slack asked to reconnect ({reason})"));
            set_state(
                LinkState::Reconnecting,
                &format!("Slack asked to reconnect ({reason})"),
            );
            return link.reopen(ad);
        }
        FrameKind::EventsApi => ad.on_event_callback(&frame.payload),
        FrameKind::Interactive => ad.on_interactive(&frame.payload),
        FrameKind::SlashCommands | FrameKind::Other(_) => {}
    }
    lose_if(link, ack_failed);
    Ok(())
}

fn lose_if(link: &mut Link, failure: Option<String>) {
    if let Some(detail) = failure {
        link.lost(&detail, true, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_until_the_next_deadline() {
        assert_eq!(wait_timeout(1000, None, None), 30_000);
        assert_eq!(wait_timeout(1000, Some(3500), None), 2500);
        assert_eq!(wait_timeout(1000, Some(3500), Some(1200)), 200);
        assert_eq!(wait_timeout(1000, Some(900), None), 1);
        assert_eq!(wait_timeout(1000, Some(1_000_000), None), 30_000);
    }

    #[test]
    fn logged_urls_lose_their_ticket() {
        assert_eq!(
            url_host("wss://wss-primary.slack.com/link/?ticket=abc"),
            "wss-primary.slack.com"
        );
        assert_eq!(url_host("ws://127.0.0.1:9/link?ticket=1"), "127.0.0.1:9");
    }
}
