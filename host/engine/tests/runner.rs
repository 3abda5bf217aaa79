//! The session runner: a front end drives a real session (openai component,
//! real tools, scripted LLM) only through `Op`s and reads only `Event`s.

use std::time::Duration;
use turnstone_engine::events::{SessionEvent, TurnOutcome};
use turnstone_engine::runner::{Ack, OpError, spawn};
use turnstone_engine::session::{EditError, SessionError};
use turnstone_protocol::{Decision, Event, Op};
use turnstone_scripted_llm::openai;
use turnstone_test_support::engine::session;
use turnstone_test_support::sse;

fn send(text: &str) -> Op {
    Op::Send {
        text: text.into(),
        parts: Vec::new(),
        client_send_id: Some("c-1".into()),
        sender: Some("u1".into()),
        attachments: Vec::new(),
    }
}

fn turn_end(e: &SessionEvent) -> bool {
    matches!(e, SessionEvent::TurnEnded(_))
}

const T: Duration = Duration::from_secs(20);

#[tokio::test]
async fn a_send_starts_a_turn_and_its_end_is_announced() {
    let f = session(vec![sse(openai::text(&["Hello", " there"]))], false).await;
    let rec = f.recorder.clone();
    let h = spawn(f.session);
    assert_eq!(h.submit(send("hi")).await.unwrap(), Ack::Started);
    assert!(h.is_busy(), "busy from the moment the send was accepted");
    rec.wait_for_event(turn_end, T).await;
    let kinds = rec.kinds();
    assert_eq!(kinds[0], "user_turn", "{kinds:?}");
    let Event::UserTurn(u) = &rec.events()[0] else {
        panic!()
    };
    assert_eq!(
        (
            u.content.as_str(),
            u.sender.as_deref(),
            u.client_send_ids.clone()
        ),
        ("hi", Some("u1"), vec!["c-1".to_string()])
    );
    assert_eq!(rec.content(), "Hello there");
    assert_eq!(rec.outcomes(), [TurnOutcome::Completed]);
    // Released after the turn.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!h.is_busy());
}

#[tokio::test]
async fn sends_during_a_turn_are_queued_unqueued_or_join_at_the_seam() {
    let f = session(
        vec![
            sse(openai::tool_call("call_1", "sleep", &["{\"ms\": 600}"])),
            sse(openai::text(&["noted"])),
        ],
        true,
    )
    .await;
    let rec = f.recorder.clone();
    let llm = &f.llm;
    let h = spawn(f.session);
    h.submit(send("wait a bit")).await.unwrap();
    rec.wait_for_event(
        |e| matches!(e, SessionEvent::Wire(Event::ToolPending(_))),
        T,
    )
    .await;
    let Ack::Queued { msg_id, position } = h.submit(send("also check the logs")).await.unwrap()
    else {
        panic!("queued while the tool runs")
    };
    assert_eq!(position, 1);
    let Ack::Queued { msg_id: second, .. } = h.submit(send("never mind")).await.unwrap() else {
        panic!()
    };
    assert_eq!(
        h.submit(Op::Unqueue { msg_id: second }).await.unwrap(),
        Ack::Unqueued { removed: true }
    );
    assert_eq!(
        h.submit(Op::Unqueue {
            msg_id: "no-such-id".into()
        })
        .await
        .unwrap(),
        Ack::Unqueued { removed: false }
    );
    let queued: Vec<Event> = rec
        .events()
        .into_iter()
        .filter(|e| matches!(e, Event::MessageQueued(_)))
        .collect();
    let Event::MessageQueued(q) = &queued[0] else {
        panic!()
    };
    assert_eq!(
        (q.msg_id.as_str(), q.message.as_str()),
        (msg_id.as_str(), "also check the logs")
    );
    rec.wait_for_event(turn_end, T).await;
    // The first joined at the tool-result seam; the unqueued one never ran.
    let body = llm.requests()[1].body.to_string();
    assert!(
        body.contains("also check the logs") && !body.contains("never mind"),
        "{body}"
    );
    assert_eq!(llm.requests().len(), 2);
}

#[tokio::test]
async fn a_message_queued_after_the_last_tool_becomes_the_next_turn() {
    let f = session(Vec::new(), true).await;
    f.llm.push(turnstone_scripted_llm::Step::Sse {
        frames: openai::text(&["slow", " answer"]),
        gap: Duration::from_millis(150),
    });
    f.llm.push(sse(openai::text(&["second answer"])));
    let rec = f.recorder.clone();
    let h = spawn(f.session);
    h.submit(send("first")).await.unwrap();
    rec.wait_for_event(|e| matches!(e, SessionEvent::Wire(Event::Content(_))), T)
        .await;
    assert!(matches!(
        h.submit(send("follow-up")).await.unwrap(),
        Ack::Queued { .. }
    ));
    let deadline = tokio::time::Instant::now() + T;
    while rec.outcomes().len() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "{:?}", rec.kinds());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let turns: Vec<String> = rec
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::UserTurn(u) => Some(u.content),
            _ => None,
        })
        .collect();
    assert_eq!(turns, ["first", "follow-up"]);
    assert!(rec.content().ends_with("second answer"));
}

#[tokio::test]
async fn approvals_are_events_answered_by_ops() {
    let f = session(Vec::new(), false).await;
    let c = f.ws.join("c.txt");
    let args = serde_json::json!({"path": c, "content": "x"}).to_string();
    f.llm
        .push(sse(openai::tool_call("call_w", "write", &[&args])));
    f.llm.push(sse(openai::text(&["written"])));
    let rec = f.recorder.clone();
    let h = spawn(f.session);
    h.submit(send("write c")).await.unwrap();
    let SessionEvent::Wire(Event::ApproveRequest(req)) = rec
        .wait_for_event(
            |e| matches!(e, SessionEvent::Wire(Event::ApproveRequest(_))),
            T,
        )
        .await
    else {
        panic!()
    };
    assert_eq!(h.pending_approvals(), std::slice::from_ref(&req));
    let wrong = h
        .submit(Op::Approve {
            cycle_id: Some("0".repeat(32)),
            call_id: None,
            decision: Decision::deny(),
        })
        .await;
    assert!(matches!(wrong, Err(OpError::Approval(_))), "{wrong:?}");
    let ok = h
        .submit(Op::Approve {
            cycle_id: None,
            call_id: Some("call_w".into()),
            decision: Decision {
                approved: true,
                ..Decision::default()
            },
        })
        .await
        .unwrap();
    assert_eq!(
        ok,
        Ack::Resolved {
            cycle_id: Some(req.cycle_id.clone())
        }
    );
    rec.wait_for_event(turn_end, T).await;
    assert!(c.exists());
    let resolved: Vec<Event> = rec
        .events()
        .into_iter()
        .filter(|e| matches!(e, Event::ApprovalResolved(_)))
        .collect();
    let Event::ApprovalResolved(r) = &resolved[0] else {
        panic!()
    };
    assert!(r.approved && r.call_ids == ["call_w"] && r.cycle_id == req.cycle_id);
    assert!(h.pending_approvals().is_empty());
    // Nothing pending: an approval without ids answers with no cycle.
    let none = h
        .submit(Op::Approve {
            cycle_id: None,
            call_id: None,
            decision: Decision::deny(),
        })
        .await
        .unwrap();
    assert_eq!(none, Ack::Resolved { cycle_id: None });
}

#[tokio::test]
async fn edits_are_refused_while_busy_and_report_their_outcome() {
    let f = session(Vec::new(), true).await;
    f.llm.push(sse(openai::tool_call(
        "call_s",
        "sleep",
        &["{\"ms\": 400}"],
    )));
    f.llm.push(sse(openai::text(&["slept"])));
    let rec = f.recorder.clone();
    let h = spawn(f.session);
    // Nothing to retry or rewind yet.
    assert!(matches!(
        h.submit(Op::Retry).await,
        Err(OpError::Session(SessionError::Edit(
            EditError::NothingToEdit(_)
        )))
    ));
    assert!(matches!(
        h.submit(Op::Rewind { turns: 1 }).await,
        Err(OpError::Session(SessionError::Edit(_)))
    ));
    h.submit(send("sleep")).await.unwrap();
    for op in [Op::Retry, Op::Clear, Op::Compact, Op::Rewind { turns: 1 }] {
        assert!(matches!(h.submit(op).await, Err(OpError::Busy)));
    }
    // A fixed binding cannot switch models (refused even when idle).
    rec.wait_for_event(turn_end, T).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(matches!(
        h.submit(Op::SetModel {
            alias: "other".into()
        })
        .await,
        Err(OpError::Session(SessionError::Edit(EditError::FixedModel)))
    ));
    let Ack::Rewound { text } = h.submit(Op::Rewind { turns: 1 }).await.unwrap() else {
        panic!()
    };
    assert_eq!(text, "sleep");
    assert!(
        rec.events()
            .iter()
            .any(|e| matches!(e, Event::ClearUi(r) if r.reason == "rewind"))
    );
    assert_eq!(h.submit(Op::Clear).await.unwrap(), Ack::Done);
}

#[tokio::test]
async fn cancel_denies_the_pending_approval_and_close_stops_everything() {
    let f = session(Vec::new(), false).await;
    let c = f.ws.join("never.txt");
    let args = serde_json::json!({"path": c, "content": "x"}).to_string();
    f.llm
        .push(sse(openai::tool_call("call_n", "write", &[&args])));
    let rec = f.recorder.clone();
    let h = spawn(f.session);
    h.submit(send("write it")).await.unwrap();
    rec.wait_for_event(
        |e| matches!(e, SessionEvent::Wire(Event::ApproveRequest(_))),
        T,
    )
    .await;
    let Ack::Cancelled { was_running, .. } = h.submit(Op::Cancel { force: false }).await.unwrap()
    else {
        panic!()
    };
    assert!(was_running);
    rec.wait_for_event(turn_end, T).await;
    assert_eq!(rec.outcomes(), [TurnOutcome::Cancelled]);
    assert!(rec.kinds().contains(&"cancelled"));
    assert!(!c.exists(), "a cancelled approval never runs the call");
    assert!(h.pending_approvals().is_empty());
    h.close(Duration::from_secs(5)).await;
    assert!(h.is_closed());
    assert!(matches!(
        h.submit(send("after")).await,
        Err(OpError::Closed)
    ));
}
