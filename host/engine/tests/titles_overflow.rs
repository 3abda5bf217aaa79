//! Two engine behaviours of a long-running product: a new workstream is
//! named after its first exchange (one extra model call, `title_updated`
//! once, stored), and a provider's context-length refusal compacts the
//! conversation and retries once before the turn fails.

use serde_json::Value;
use std::time::Duration;
use turnstone_engine::events::SessionEvent;
use turnstone_engine::runner::spawn;
use turnstone_protocol::{Event, Op};
use turnstone_scripted_llm::{Step, openai};
use turnstone_storage::prelude::*;
use turnstone_test_support::engine::session;
use turnstone_test_support::sse;

const T: Duration = Duration::from_secs(20);

fn send(text: &str) -> Op {
    Op::Send {
        text: text.into(),
        parts: Vec::new(),
        client_send_id: None,
        sender: None,
        attachments: Vec::new(),
    }
}

fn is_title(e: &SessionEvent) -> bool {
    matches!(e, SessionEvent::Wire(Event::TitleUpdated(_)))
}

/// Waits until `n` turns have ended.
async fn turns_ended(rec: &turnstone_test_support::Recorder, n: usize) {
    let deadline = tokio::time::Instant::now() + T;
    while rec.outcomes().len() < n {
        assert!(tokio::time::Instant::now() < deadline, "{:?}", rec.kinds());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn database(dir: &std::path::Path) -> Storage {
    turnstone_storage::open(&DbConfig {
        backend: BackendKind::Sqlite,
        path: Some(dir.join("t.db")),
        ..Default::default()
    })
    .await
    .unwrap()
}

async fn workstream(db: &Storage, alias: Option<&str>) -> String {
    let r = db
        .create_workstream(&NewWorkstream {
            name: "ws-1".into(),
            alias: alias.map(str::to_string),
            ..Default::default()
        })
        .await
        .unwrap();
    db.publish_workstream(&r).await.unwrap();
    r.ws_id
}

fn context_length_error() -> Step {
    Step::Status {
        status: 400,
        headers: Vec::new(),
        body: r#"{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}"#.into(),
    }
}

fn messages(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_new_workstream_is_titled_once_after_its_first_exchange() {
    let f = session(
        vec![
            sse(openai::text(&["Blue-green it: ", "two pools, one switch."])),
            sse(openai::text(&["\"Blue-green deploy plan.\""])),
            sse(openai::text(&["You're welcome."])),
        ],
        false,
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    let ws = workstream(&db, None).await;
    let rec = f.recorder.clone();
    let s = f
        .another(f.binding.clone(), f.config(&ws))
        .with_storage(db.clone(), &ws)
        .with_titles(None);
    let h = spawn(s);
    h.submit(send("how should we deploy the API?"))
        .await
        .unwrap();
    let Some(SessionEvent::Wire(Event::TitleUpdated(t))) =
        Some(rec.wait_for_event(is_title, T).await)
    else {
        panic!("not a title")
    };
    assert_eq!(t.title, "Blue-green deploy plan");
    let stored = db.get_workstream(&ws).await.unwrap().unwrap();
    assert_eq!(stored.title.as_deref(), Some("Blue-green deploy plan"));

    // The title call: tool-less, told what to do, shown the exchange.
    let reqs = f.llm.requests();
    let title_req = &reqs[1].body;
    assert!(
        title_req
            .get("tools")
            .is_none_or(|t| t.as_array().is_none_or(Vec::is_empty)),
        "{title_req}"
    );
    let msgs = messages(title_req);
    assert_eq!(msgs[0].0, "system");
    assert!(msgs[0].1.contains("short title"), "{msgs:?}");
    assert!(
        msgs[1].1.contains("how should we deploy the API?"),
        "{msgs:?}"
    );
    assert!(msgs[1].1.contains("two pools, one switch."), "{msgs:?}");

    // The second exchange asks for no title.
    h.submit(send("thanks")).await.unwrap();
    turns_ended(&rec, 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(f.llm.requests().len(), 3);
    let titles = rec.all().iter().filter(|e| is_title(e)).count();
    assert_eq!(titles, 1);
}

#[tokio::test]
async fn a_named_workstream_keeps_its_name_and_costs_no_title_call() {
    let f = session(vec![sse(openai::text(&["Sure."]))], false).await;
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    let ws = workstream(&db, Some("release-notes")).await;
    let rec = f.recorder.clone();
    let s = f
        .another(f.binding.clone(), f.config(&ws))
        .with_storage(db.clone(), &ws)
        .with_titles(None);
    let h = spawn(s);
    h.submit(send("draft the notes")).await.unwrap();
    turns_ended(&rec, 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(f.llm.requests().len(), 1);
    assert!(!rec.all().iter().any(is_title));
    assert_eq!(db.get_workstream(&ws).await.unwrap().unwrap().title, None);
}

#[tokio::test]
async fn a_context_length_refusal_compacts_and_retries_once() {
    let mut f = session(
        vec![
            sse(openai::text(&["First answer."])),
            context_length_error(),
            sse(openai::text(&["Summary: we discussed the first question."])),
            sse(openai::text(&["Second answer."])),
            // The next turn overflows even after compacting: it fails.
            context_length_error(),
            sse(openai::text(&["Summary again."])),
            context_length_error(),
        ],
        false,
    )
    .await;
    f.session.send("first question").await.unwrap();
    f.session.send("second question").await.unwrap();
    let reqs = f.llm.requests();
    assert_eq!(reqs.len(), 4);
    // The retry carries the summary and the request verbatim, not the old turns.
    let retry = messages(&reqs[3].body);
    let texts: Vec<&str> = retry.iter().map(|(_, c)| c.as_str()).collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("we discussed the first question")),
        "{retry:?}"
    );
    assert_eq!(
        retry.last().unwrap(),
        &("user".to_string(), "second question".to_string())
    );
    assert!(!texts.contains(&"first question"), "{retry:?}");
    assert!(!texts.contains(&"First answer."), "{retry:?}");
    let events = f.recorder.events();
    assert!(
        events.iter().any(|e| matches!(e, Event::Info(m) if m.message.contains("longer than the model's context window"))),
        "{:?}",
        f.recorder.kinds()
    );
    assert!(events.iter().any(
        |e| matches!(e, Event::Compaction(c) if c.trigger == "overflow" && c.ok == Some(true))
    ));

    // Only once per turn: a second refusal fails the turn with the reason.
    let err = f.session.send("third question").await.unwrap_err();
    assert!(err.to_string().contains("too long for the model"), "{err}");
    assert_eq!(f.llm.requests().len(), 7);
}
