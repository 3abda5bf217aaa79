//! Server-sent events: the per-workstream stream (connect preamble, replay by
//! event id, projections, pings) and the node-wide global stream.

use super::{Node, loaded, node, owner};
use crate::events::{CatchUp, Numbered, Replay};
use crate::global::GlobalEvent;
use crate::http::{ApiError, AppState, Identity};
use crate::metrics::SseLag;
use crate::workstream::{Core, Status, Workstream};
use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use turnstone_protocol::{
    Aggregate, Connected, Event, GlobalEvent as Frame, InProgressSnapshot, NodeSnapshot, Reason,
    ReplayOk, ReplayTruncated, StateChange, WorkstreamSnapshot, WsEvent, wire,
};

/// Keep-alive comment interval.
const PING: Duration = Duration::from_secs(5);

/// Query of the per-workstream stream.
#[derive(Deserialize, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct EventsQuery {
    /// `1`: also send `user_turn` events (the SDK always does).
    user_turn: Option<String>,
    /// `1`: also send `tool_turn` events.
    tool_turn: Option<String>,
    /// Resume after this event id (the `Last-Event-ID` header wins).
    last_event_id: Option<String>,
    /// Resume from a `/history` hand-off token.
    history_token: Option<String>,
}

fn flag(v: &Option<String>) -> bool {
    matches!(v.as_deref(), Some("1" | "true" | "yes"))
}

fn data(v: &impl serde::Serialize) -> Bytes {
    Bytes::from(format!("data: {}\n\n", wire::to_json(v)))
}

/// Counts an open SSE connection for as long as it lives.
struct ConnGuard(Arc<Node>);

impl ConnGuard {
    fn new(node: Arc<Node>) -> Self {
        node.metrics.sse_connections.fetch_add(1, Ordering::Relaxed);
        Self(node)
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.0
            .metrics
            .sse_connections
            .fetch_sub(1, Ordering::Relaxed);
    }
}

fn sse_response(body: Body) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

fn retry_frame() -> Bytes {
    let mut b = [0u8; 2];
    let _ = getrandom::fill(&mut b);
    let ms = 2500 + u16::from_le_bytes(b) % 2001;
    Bytes::from(format!("retry: {ms}\n\n"))
}

fn ping_frame() -> Bytes {
    let ts = time_now_iso();
    Bytes::from(format!(": ping - {ts}\n\n"))
}

/// The time as the original's keep-alive writes it (Python's
/// `str(datetime.now(timezone.utc))`): `2026-12-01 07:39:02.123456+00:00`.
fn time_now_iso() -> String {
    const FORMAT: &[time::format_description::FormatItem<'static>] = time::macros::format_description!(
        "[year]-[month]-[day] [hour]:[minute]:[second].[subsecond digits:6]+00:00"
    );
    time::OffsetDateTime::now_utc()
        .format(FORMAT)
        .unwrap_or_default()
}

/// The fresh-connect preamble (no ids), from the status `s` read as the
/// stream was subscribed.
fn preamble(w: &Workstream, s: Status, out: &mut VecDeque<Bytes>) {
    let core = &w.core;
    let ws = core.ws_id.as_str();
    let frame = |e: Event| data(&WsEvent::new(ws, e));
    out.push_back(frame(Event::ClearUi(Reason {
        reason: "tokenless_history_bootstrap".into(),
    })));
    out.push_back(frame(Event::Connected(Connected {
        model: core.model.1.clone(),
        model_alias: core.model.0.clone(),
        project_name: None,
        skip_permissions: core.skip_permissions,
    })));
    if s.turn_count > 0
        && let Some(st) = s.last_status.clone()
        && st.prompt_tokens > 0
    {
        out.push_back(frame(Event::Status(st)));
    }
    out.push_back(frame(Event::StateChange(StateChange {
        state: s.state,
        acting_user_id: core.user_id.clone(),
    })));
    for card in w.session.pending_approvals() {
        out.push_back(frame(Event::ApproveRequest(card)));
    }
    if s.streaming {
        out.push_back(frame(Event::InProgressSnapshot(InProgressSnapshot {
            content: s.content,
            reasoning: s.reasoning,
        })));
    }
}

struct WsStream {
    pending: VecDeque<Bytes>,
    rx: tokio::sync::broadcast::Receiver<Numbered>,
    core: Arc<Core>,
    last_id: u64,
    user_turn: bool,
    tool_turn: bool,
    ping: tokio::time::Interval,
    stop: tokio_util::sync::CancellationToken,
    done: bool,
    guard: ConnGuard,
}

impl WsStream {
    /// Renders a numbered event for this subscriber (projections applied).
    fn render(&mut self, n: &Numbered) -> Bytes {
        self.last_id = self.last_id.max(n.id);
        let j = n.json();
        let unsupported = if !self.user_turn && j.contains("\"type\":\"user_turn\"") {
            Some("user_turn_projection_unsupported")
        } else if !self.tool_turn
            && j.contains("\"accepted\":true")
            && j.contains("\"type\":\"tool_result\"")
        {
            Some("tool_turn_projection_unsupported")
        } else {
            None
        };
        if j.contains("\"type\":\"ws_closed\"") {
            self.done = true;
        }
        match unsupported {
            Some(reason) => {
                let v = WsEvent::new(
                    &self.core.ws_id,
                    Event::ReplayTruncated(ReplayTruncated {
                        reason: reason.into(),
                        lost_count: None,
                        last_event_id: None,
                    }),
                );
                Bytes::from(format!("id: {}\ndata: {}\n\n", n.id, wire::to_json(&v)))
            }
            None => n.frame(),
        }
    }

    /// After the live receiver lagged: queues what the ring holds after the
    /// last event sent. If the ring has moved past some of them, a
    /// `replay_truncated` says exactly how many are lost (the ids then jump
    /// by that many) before the rest follows; the client may refetch history.
    fn catch_up(&mut self) {
        let CatchUp { lost, events } = self.core.hub.catch_up(self.last_id);
        let metrics = &self.guard.0.metrics;
        if lost > 0 {
            metrics.sse_lagged(SseLag::Truncated);
            self.pending.push_back(data(&WsEvent::new(
                &self.core.ws_id,
                Event::ReplayTruncated(ReplayTruncated {
                    reason: "subscriber_lagged".into(),
                    lost_count: Some(lost),
                    last_event_id: Some(self.last_id),
                }),
            )));
        } else {
            metrics.sse_lagged(SseLag::Resynced);
        }
        for n in &events {
            let b = self.render(n);
            self.pending.push_back(b);
        }
    }

    async fn next(&mut self) -> Option<Bytes> {
        if let Some(b) = self.pending.pop_front() {
            return Some(b);
        }
        if self.done {
            return None;
        }
        loop {
            tokio::select! {
                r = self.rx.recv() => match r {
                    Ok(n) => {
                        if n.id <= self.last_id { continue; }
                        return Some(self.render(&n));
                    }
                    Err(RecvError::Lagged(_)) => {
                        self.catch_up();
                        if let Some(b) = self.pending.pop_front() { return Some(b); }
                    }
                    Err(RecvError::Closed) => return None,
                },
                _ = self.ping.tick() => return Some(ping_frame()),
                () = self.stop.cancelled() => return None,
            }
        }
    }
}

fn header_cursor(headers: &HeaderMap) -> Option<u64> {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse().ok())
}

#[utoipa::path(get, path = "/v1/api/workstreams/{ws_id}/events", tag = "events", summary = "Server-sent events of one workstream", description = "A `text/event-stream`: a `retry:` frame, then one `data:` frame per event, each a JSON `WsEvent` (see docs/server.md for the connect preamble, replay by id and projections), with `: ping` comments every 5 s.", params(("ws_id" = String, Path, description = "Workstream id (32 hex)"), EventsQuery), responses((status = 200, description = "The event stream; every `data:` frame is one `WsEvent`", body = turnstone_protocol::WsEvent, content_type = "text/event-stream"), super::Guarded, super::Missing))]
pub(crate) async fn workstream_events(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let node = node(&state)?.clone();
    let w = loaded(&state, &id, &ws_id)?;
    let core = w.core.clone();
    let cursor = header_cursor(&headers)
        .or_else(|| q.last_event_id.as_deref().and_then(|s| s.parse().ok()))
        .or_else(|| q.history_token.as_deref().and_then(|t| core.redeem(t)));
    let (replay, rx, status) = core.subscribe(cursor);
    let mut pending = VecDeque::new();
    pending.push_back(retry_frame());
    let last_id = replay.covers_through(cursor);
    let mut replayed = Vec::new();
    match replay {
        Replay::Fresh { .. } => preamble(&w, status, &mut pending),
        Replay::Ok(events) => {
            pending.push_back(data(&WsEvent::new(
                &ws_id,
                Event::ReplayOk(ReplayOk {
                    replayed: events.len(),
                    last_event_id: cursor,
                }),
            )));
            replayed = events;
        }
        Replay::Truncated { lost_count, .. } => {
            pending.push_back(data(&WsEvent::new(
                &ws_id,
                Event::ReplayTruncated(ReplayTruncated {
                    reason: "ring_evicted".into(),
                    lost_count: Some(lost_count),
                    last_event_id: cursor,
                }),
            )));
            preamble(&w, status, &mut pending);
        }
    }
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING, PING);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut st = WsStream {
        pending,
        rx,
        core,
        last_id,
        user_turn: flag(&q.user_turn),
        tool_turn: flag(&q.tool_turn),
        ping,
        stop: node.shutdown.clone(),
        done: false,
        guard: ConnGuard::new(node),
    };
    for n in &replayed {
        let b = st.render(n);
        st.pending.push_back(b);
    }
    let stream = futures::stream::unfold(st, |mut st| async move {
        st.next()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), st))
    });
    Ok(sse_response(Body::from_stream(stream)))
}

struct GlobalStream {
    pending: VecDeque<Bytes>,
    rx: tokio::sync::broadcast::Receiver<GlobalEvent>,
    only: Option<String>,
    ping: tokio::time::Interval,
    stop: tokio_util::sync::CancellationToken,
    guard: ConnGuard,
}

impl GlobalStream {
    async fn next(&mut self) -> Option<Bytes> {
        if let Some(b) = self.pending.pop_front() {
            return Some(b);
        }
        loop {
            tokio::select! {
                r = self.rx.recv() => match r {
                    Ok(e) => {
                        if let Some(me) = &self.only
                            && e.owner.as_deref() != Some(me.as_str())
                        {
                            continue;
                        }
                        return Some(Bytes::from(format!("id: {}\ndata: {}\n\n", e.id, e.json)));
                    }
                    Err(RecvError::Lagged(n)) => {
                        self.guard.0.metrics.sse_lagged(SseLag::GlobalTruncated);
                        return Some(data(&Frame::ReplayTruncated(ReplayTruncated {
                            reason: "subscriber_lagged".into(),
                            lost_count: Some(n),
                            last_event_id: None,
                        })));
                    }
                    Err(RecvError::Closed) => return None,
                },
                _ = self.ping.tick() => return Some(ping_frame()),
                () = self.stop.cancelled() => return None,
            }
        }
    }
}

#[utoipa::path(get, path = "/v1/api/events/global", tag = "events", summary = "Node-wide server-sent events (filtered to the caller unless service scope)", description = "A `text/event-stream`: a `retry:` frame, `node_snapshot`, then one `data:` frame per `GlobalEvent`, with `: ping` comments every 5 s.", responses((status = 200, description = "The event stream; every `data:` frame is one `GlobalEvent`", body = turnstone_protocol::GlobalEvent, content_type = "text/event-stream"), super::Guarded))]
pub(crate) async fn global_events(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
) -> Result<Response, ApiError> {
    let node = node(&state)?.clone();
    let only = owner(&id).map(String::from);
    let rx = node.mgr.global.subscribe();
    let list: Vec<WorkstreamSnapshot> = node
        .mgr
        .all()
        .iter()
        .filter(|w| only.is_none() || w.core.user_id == only)
        .map(|w| WorkstreamSnapshot {
            ws_id: w.core.ws_id.clone(),
            user_id: w.core.user_id.clone(),
            model: w.core.model.1.clone(),
            model_alias: w.core.model.0.clone(),
            state: w.core.ws_state(false),
        })
        .collect();
    let (tokens, tools) = node.metrics.totals();
    let mut pending = VecDeque::new();
    pending.push_back(retry_frame());
    pending.push_back(data(&Frame::NodeSnapshot(NodeSnapshot {
        node_id: state.node_id.clone(),
        workstreams: list,
        health: super::health_fields(&state),
        aggregate: Aggregate {
            total_tokens: tokens,
            total_tool_calls: tools,
            active_count: node.mgr.all().iter().filter(|w| w.is_busy()).count(),
            total_count: node.mgr.len(),
        },
        filtered_to_user: only.clone(),
    })));
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING, PING);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let st = GlobalStream {
        pending,
        rx,
        only,
        ping,
        stop: node.shutdown.clone(),
        guard: ConnGuard::new(node),
    };
    let stream = futures::stream::unfold(st, |mut st| async move {
        st.next()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), st))
    });
    Ok(sse_response(Body::from_stream(stream)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn keep_alive_comments_carry_a_timestamp_like_the_original() {
        let frame = String::from_utf8(super::ping_frame().to_vec()).unwrap();
        let ts = frame
            .strip_prefix(": ping - ")
            .and_then(|r| r.strip_suffix("\n\n"))
            .unwrap_or_else(|| panic!("{frame:?}"));
        // 2026-12-01 07:39:02.123456+00:00
        let b = ts.as_bytes();
        assert_eq!(ts.len(), 32, "{ts}");
        for (i, c) in [
            (4, b'-'),
            (7, b'-'),
            (10, b' '),
            (13, b':'),
            (16, b':'),
            (19, b'.'),
        ] {
            assert_eq!(b[i], c, "{ts}");
        }
        assert!(ts.ends_with("+00:00"), "{ts}");
        let year: i32 = ts[..4].parse().unwrap();
        assert!(year >= 2024, "{ts}");
        assert!(ts[20..26].bytes().all(|c| c.is_ascii_digit()), "{ts}");
    }
}
