//! Every event variant: the typed value serialises to the contract's shape
//! (`../shared/reference/wire-contract.md` §3.3–3.5, and what this server
//! sent before the types existed), byte for byte, and parses back equal.

use super::to_json;
use crate::*;
use serde_json::{Value, json};

const WS: &str = "0123456789abcdef0123456789abcdef";

fn item() -> (ToolItem, Value) {
    (
        ToolItem {
            call_id: "call_1".into(),
            header: "⚙ bash: echo hello-from-tool".into(),
            preview: None,
            func_name: "bash".into(),
            approval_label: "bash".into(),
            needs_approval: true,
            error: None,
            agent: None,
            heuristic_verdict: None,
            judge_verdict: None,
            grants: Vec::new(),
            policy: None,
        },
        json!({"call_id": "call_1", "header": "⚙ bash: echo hello-from-tool", "preview": null,
               "func_name": "bash", "approval_label": "bash", "needs_approval": true, "error": null}),
    )
}

fn ws_state() -> (WsState, Value) {
    (
        WsState {
            state: SessionState::Idle,
            tokens: 42,
            context_ratio: 0.25,
            activity: String::new(),
            activity_state: String::new(),
            kind: "interactive".into(),
            parent_ws_id: None,
            persistence_state: "persisted".into(),
            name: "ws-1".into(),
            content: Some("Hello.".into()),
        },
        json!({"state": "idle", "tokens": 42, "context_ratio": 0.25, "activity": "",
               "activity_state": "", "kind": "interactive", "parent_ws_id": null,
               "persistence_state": "persisted", "name": "ws-1", "content": "Hello."}),
    )
}

/// (event, its fields besides `type` and `ws_id`).
fn cases() -> Vec<(Event, Value)> {
    let (it, it_json) = item();
    let (st, st_json) = ws_state();
    vec![
        (
            Event::Connected(Connected {
                model: "qwen3-32b".into(),
                model_alias: "local".into(),
                project_name: None,
                skip_permissions: false,
            }),
            json!({"model": "qwen3-32b", "model_alias": "local", "project_name": null, "skip_permissions": false}),
        ),
        (
            Event::ClearUi(Reason {
                reason: "tokenless_history_bootstrap".into(),
            }),
            json!({"reason": "tokenless_history_bootstrap"}),
        ),
        (
            Event::StateChange(StateChange {
                state: SessionState::Attention,
                acting_user_id: Some("u1".into()),
            }),
            json!({"state": "attention", "acting_user_id": "u1"}),
        ),
        (
            Event::StateChange(StateChange {
                state: SessionState::Idle,
                acting_user_id: None,
            }),
            json!({"state": "idle", "acting_user_id": null}),
        ),
        (
            Event::UserTurn(UserTurn {
                content: "hi".into(),
                attachments: vec![],
                sender: Some("u1".into()),
                client_send_ids: vec!["c-1".into()],
                event_id: 1,
            }),
            json!({"content": "hi", "attachments": [], "sender": "u1", "client_send_ids": ["c-1"], "_event_id": 1}),
        ),
        (
            Event::MessageQueued(MessageQueued {
                message: "also".into(),
                msg_id: "m1".into(),
                priority: "normal".into(),
                sender: Some("u1".into()),
                client_send_id: None,
            }),
            json!({"message": "also", "msg_id": "m1", "priority": "normal", "sender": "u1", "client_send_id": null}),
        ),
        (Event::ThinkingStart, json!({})),
        (Event::ThinkingStop, json!({})),
        (Event::reasoning("hmm"), json!({"text": "hmm"})),
        (Event::content("Hello"), json!({"text": "Hello"})),
        (Event::StreamEnd, json!({})),
        (
            Event::Status(Status {
                prompt_tokens: 11,
                completion_tokens: 5,
                total_tokens: 16,
                context_window: 128_000,
                pct: 0.1,
                effort: None,
                cache_creation_tokens: 0,
                cache_read_tokens: 0,
                tool_calls_this_turn: 1,
                turn_count: 2,
            }),
            json!({"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16,
                   "context_window": 128000, "pct": 0.1, "effort": null,
                   "cache_creation_tokens": 0, "cache_read_tokens": 0,
                   "tool_calls_this_turn": 1, "turn_count": 2}),
        ),
        (
            Event::ToolPending(Items {
                items: vec![it.clone()],
            }),
            json!({"items": [it_json.clone()]}),
        ),
        (
            Event::ToolInfo(Items {
                items: vec![it.clone()],
            }),
            json!({"items": [it_json.clone()]}),
        ),
        (
            Event::ApproveRequest(ApproveRequest {
                cycle_id: "c".repeat(32),
                items: vec![it.clone()],
                judge_pending: false,
            }),
            json!({"cycle_id": "c".repeat(32), "items": [it_json.clone()], "judge_pending": false}),
        ),
        (
            Event::ApprovalResolved(ApprovalResolved {
                approved: true,
                feedback: None,
                always: false,
                cycle_id: "c".repeat(32),
                call_ids: vec!["call_1".into()],
            }),
            json!({"approved": true, "feedback": null, "always": false, "cycle_id": "c".repeat(32), "call_ids": ["call_1"]}),
        ),
        (
            Event::ToolOutputChunk(ToolOutputChunk {
                call_id: "call_1".into(),
                chunk: "hello-from-tool\n".into(),
            }),
            json!({"call_id": "call_1", "chunk": "hello-from-tool\n"}),
        ),
        (
            Event::ToolResult(ToolResult {
                call_id: "call_1".into(),
                name: "bash".into(),
                output: "hello-from-tool\n".into(),
                is_error: false,
                accepted: None,
                effect_status: None,
                event_id: None,
                capabilities: None,
            }),
            json!({"call_id": "call_1", "name": "bash", "output": "hello-from-tool\n", "is_error": false}),
        ),
        (
            Event::ToolResult(ToolResult {
                call_id: "call_1".into(),
                name: "bash".into(),
                output: "x".into(),
                is_error: true,
                accepted: Some(true),
                effect_status: Some("failed".into()),
                event_id: Some(9),
                capabilities: None,
            }),
            json!({"call_id": "call_1", "name": "bash", "output": "x", "is_error": true,
                   "accepted": true, "effect_status": "failed", "_event_id": 9}),
        ),
        (Event::WsState(st.clone()), st_json.clone()),
        (
            Event::Compaction(Compaction {
                phase: "end".into(),
                compaction_id: "k1".into(),
                target: "workstream".into(),
                trigger: "auto".into(),
                where_: "tool_loop".into(),
                ok: Some(true),
                reason: None,
            }),
            json!({"phase": "end", "compaction_id": "k1", "target": "workstream",
                   "trigger": "auto", "where": "tool_loop", "ok": true}),
        ),
        (Event::info("Cancelled."), json!({"message": "Cancelled."})),
        (
            Event::error("model request failed"),
            json!({"message": "model request failed"}),
        ),
        (
            Event::BusyError(Message {
                message: "/compact refused: a turn is running".into(),
            }),
            json!({"message": "/compact refused: a turn is running"}),
        ),
        (Event::Cancelled, json!({})),
        (
            Event::InProgressSnapshot(InProgressSnapshot {
                content: "Hel".into(),
                reasoning: String::new(),
            }),
            json!({"content": "Hel", "reasoning": ""}),
        ),
        (
            Event::ReplayOk(ReplayOk {
                replayed: 3,
                last_event_id: Some(7),
            }),
            json!({"replayed": 3, "last_event_id": 7}),
        ),
        (
            Event::ReplayTruncated(ReplayTruncated {
                reason: "ring_evicted".into(),
                lost_count: Some(4),
                last_event_id: Some(2),
            }),
            json!({"reason": "ring_evicted", "lost_count": 4, "last_event_id": 2}),
        ),
        (
            Event::ReplayTruncated(ReplayTruncated {
                reason: "tool_turn_projection_unsupported".into(),
                lost_count: None,
                last_event_id: None,
            }),
            json!({"reason": "tool_turn_projection_unsupported"}),
        ),
        (
            Event::WsClosed(Reason {
                reason: "closed".into(),
            }),
            json!({"reason": "closed"}),
        ),
        (
            Event::AgentEvent(AgentEvent {
                origin: AgentOrigin {
                    parent_call_id: "call_9".into(),
                    agent_ws_id: "fedcba".into(),
                    depth: 1,
                },
                event: Box::new(Event::ToolResult(ToolResult {
                    call_id: "c1".into(),
                    name: "read_file".into(),
                    output: "1\tx".into(),
                    is_error: false,
                    accepted: None,
                    effect_status: None,
                    event_id: None,
                    capabilities: None,
                })),
            }),
            json!({"parent_call_id": "call_9", "agent_ws_id": "fedcba", "depth": 1,
                   "event": {"type": "tool_result", "call_id": "c1", "name": "read_file",
                             "output": "1\tx", "is_error": false}}),
        ),
        (
            Event::AgentContext(AgentContext {
                parent_call_id: "call_9".into(),
                prompt_tokens: 900,
                context_window: 32768,
            }),
            json!({"parent_call_id": "call_9", "prompt_tokens": 900, "context_window": 32768}),
        ),
        (
            Event::SystemTurn(SystemTurn {
                content: "Watch ci fired.".into(),
                source: "watch".into(),
                meta: json!({"watch_id": "w1"}),
            }),
            json!({"content": "Watch ci fired.", "source": "watch", "meta": {"watch_id": "w1"}}),
        ),
        (
            Event::WatchChanged(WatchChanged {
                watch: WatchInfo {
                    watch_id: "w1".into(),
                    name: "ci".into(),
                    command: "gh pr checks".into(),
                    poll_every_secs: 30,
                    stop_on: Some("exit_code == 0".into()),
                    max_polls: 100,
                    polls: 2,
                    state: "active".into(),
                    next_poll: Some("2026-12-02T10:00:00Z".into()),
                },
            }),
            json!({"watch": {"watch_id": "w1", "name": "ci", "command": "gh pr checks",
                   "poll_every_secs": 30, "stop_on": "exit_code == 0", "max_polls": 100,
                   "polls": 2, "state": "active", "next_poll": "2026-12-02T10:00:00Z"}}),
        ),
        (
            Event::Preview(Preview {
                preview_id: "p1".into(),
                kind: "html".into(),
                title: "Report".into(),
                media_type: "text/html".into(),
                size: 12,
                url: "/v1/api/workstreams/w/previews/p1".into(),
                call_id: Some("c2".into()),
            }),
            json!({"preview_id": "p1", "kind": "html", "title": "Report", "media_type": "text/html",
                   "size": 12, "url": "/v1/api/workstreams/w/previews/p1", "call_id": "c2"}),
        ),
    ]
}

#[test]
fn every_workstream_event_has_the_contract_shape_and_round_trips() {
    let cases = cases();
    let mut kinds: Vec<&str> = cases.iter().map(|(e, _)| e.kind()).collect();
    kinds.dedup();
    assert_eq!(kinds.len(), 32, "one case per variant: {kinds:?}");
    for (event, fields) in cases {
        let mut want = fields.as_object().cloned().unwrap();
        want.insert("type".into(), event.kind().into());
        if !matches!(event, Event::Connected(_)) {
            want.insert("ws_id".into(), WS.into());
        }
        let want = Value::Object(want);
        let framed = WsEvent::new(WS, event.clone());
        assert_eq!(to_json(&framed), want.to_string(), "{}", event.kind());
        let back: WsEvent = serde_json::from_str(&want.to_string()).unwrap();
        assert_eq!(back, framed, "{}", event.kind());
        // The bare event (no ws_id) parses from the same frame too.
        let bare: Event = serde_json::from_value(want.clone()).unwrap();
        assert_eq!(bare, event);
    }
}

#[test]
fn every_global_event_has_the_contract_shape_and_round_trips() {
    let (it, it_json) = item();
    let (st, st_json) = ws_state();
    let with = |extra: Value, base: &Value| {
        let mut m = base.as_object().cloned().unwrap();
        m.extend(extra.as_object().cloned().unwrap());
        Value::Object(m)
    };
    let cases = vec![
        (
            GlobalEvent::NodeSnapshot(NodeSnapshot {
                node_id: "n1".into(),
                workstreams: vec![WorkstreamSnapshot {
                    ws_id: WS.into(),
                    user_id: Some("u1".into()),
                    model: "m".into(),
                    model_alias: "local".into(),
                    state: st.clone(),
                }],
                health: Health {
                    status: "ok".into(),
                    version: "0.1.0".into(),
                    node_id: "n1".into(),
                    uptime_seconds: 1.5,
                    backend: BackendHealth {
                        status: "up".into(),
                    },
                    mcp: None,
                    model: None,
                    max_ws: None,
                    workstreams: None,
                    default_model: None,
                    process_sandbox: None,
                },
                aggregate: Aggregate {
                    total_tokens: 1,
                    total_tool_calls: 2,
                    active_count: 0,
                    total_count: 1,
                },
                filtered_to_user: None,
            }),
            json!({"type": "node_snapshot", "node_id": "n1",
                   "workstreams": [with(json!({"ws_id": WS, "user_id": "u1", "model": "m", "model_alias": "local"}), &st_json)],
                   "health": {"status": "ok", "version": "0.1.0", "node_id": "n1",
                              "uptime_seconds": 1.5, "backend": {"status": "up"}, "mcp": null},
                   "aggregate": {"total_tokens": 1, "total_tool_calls": 2, "active_count": 0, "total_count": 1},
                   "filtered_to_user": null}),
        ),
        (
            GlobalEvent::WsCreated(WsCreated {
                ws_id: WS.into(),
                name: "ws-1".into(),
                model: "m".into(),
                model_alias: "local".into(),
                kind: "interactive".into(),
                parent_ws_id: None,
                user_id: Some("u1".into()),
                project_id: None,
                persona: None,
            }),
            json!({"type": "ws_created", "ws_id": WS, "name": "ws-1", "model": "m", "model_alias": "local",
                   "kind": "interactive", "parent_ws_id": null, "user_id": "u1", "project_id": null, "persona": null}),
        ),
        (
            GlobalEvent::WsState(GlobalWsState {
                ws_id: WS.into(),
                state: st.clone(),
            }),
            with(json!({"type": "ws_state", "ws_id": WS}), &st_json),
        ),
        (
            GlobalEvent::WsActivity(WsActivity {
                ws_id: WS.into(),
                activity: "Reasoning…".into(),
                activity_state: "thinking".into(),
            }),
            json!({"type": "ws_activity", "ws_id": WS, "activity": "Reasoning…", "activity_state": "thinking"}),
        ),
        (
            GlobalEvent::WsRename(WsRename {
                ws_id: WS.into(),
                name: "new".into(),
            }),
            json!({"type": "ws_rename", "ws_id": WS, "name": "new"}),
        ),
        (
            GlobalEvent::ApproveRequest(GlobalApproveRequest {
                ws_id: WS.into(),
                detail: ApproveDetail {
                    kind: "approve_request".into(),
                    cycle_id: "c1".into(),
                    items: vec![it],
                },
            }),
            json!({"type": "approve_request", "ws_id": WS,
                   "detail": {"type": "approve_request", "cycle_id": "c1", "items": [it_json]}}),
        ),
        (
            GlobalEvent::ApprovalResolved(GlobalApprovalResolved {
                ws_id: WS.into(),
                resolved: ApprovalResolved {
                    approved: false,
                    feedback: Some("no".into()),
                    always: false,
                    cycle_id: "c1".into(),
                    call_ids: vec!["call_1".into()],
                },
            }),
            json!({"type": "approval_resolved", "ws_id": WS, "approved": false, "feedback": "no",
                   "always": false, "cycle_id": "c1", "call_ids": ["call_1"]}),
        ),
        (
            GlobalEvent::WsClosed(GlobalWsClosed {
                ws_id: WS.into(),
                reason: "idle".into(),
                name: "ws-1".into(),
            }),
            json!({"type": "ws_closed", "ws_id": WS, "reason": "idle", "name": "ws-1"}),
        ),
        (
            GlobalEvent::Aggregate(Aggregate {
                total_tokens: 5,
                total_tool_calls: 1,
                active_count: 1,
                total_count: 2,
            }),
            json!({"type": "aggregate", "total_tokens": 5, "total_tool_calls": 1, "active_count": 1, "total_count": 2}),
        ),
        (
            GlobalEvent::HealthChanged(HealthChanged {
                backend_status: "down".into(),
                status: "degraded".into(),
                backend: BackendHealth {
                    status: "down".into(),
                },
                default_model: "local".into(),
            }),
            json!({"type": "health_changed", "backend_status": "down", "status": "degraded",
                   "backend": {"status": "down"}, "default_model": "local"}),
        ),
    ];
    let mut cases = cases;
    cases.push((
        GlobalEvent::ReplayTruncated(ReplayTruncated {
            reason: "subscriber_lagged".into(),
            lost_count: Some(12),
            last_event_id: None,
        }),
        json!({"type": "replay_truncated", "reason": "subscriber_lagged", "lost_count": 12}),
    ));
    assert_eq!(cases.len(), 11, "one case per variant");
    for (event, want) in cases {
        assert_eq!(to_json(&event), want.to_string());
        let back: GlobalEvent = serde_json::from_value(want).unwrap();
        assert_eq!(back, event);
    }
}
