//! Sub-agents end to end: the real `agent` component's `task_agent` calls
//! the host's `agents` interface, which runs a child session on the scripted
//! LLM with the real tool components; its events nest in the parent's
//! stream, its approvals are the parent's, and its answer is the result.

use serde_json::Value;
use std::time::Duration;
use turnstone_engine::session::{AgentContext, Budget, SessionConfig};
use turnstone_protocol::{Event, SessionState};
use turnstone_scripted_llm::{ScriptedLlm, openai};
use turnstone_storage::prelude::*;
use turnstone_test_support::engine::session as fixture;
use turnstone_test_support::sse;

fn task(id: &str, prompt: &str) -> turnstone_scripted_llm::Step {
    let args = serde_json::json!({ "prompt": prompt }).to_string();
    sse(openai::tool_call(id, "task_agent", &[&args]))
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn system_text(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// The content of the tool message answering `call_id` in request `n`.
fn tool_output(llm: &ScriptedLlm, n: usize, call_id: &str) -> String {
    llm.requests()[n].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .unwrap_or_else(|| panic!("no result for {call_id} in request {n}"))
}

#[tokio::test]
async fn a_sub_agent_works_with_task_tools_and_its_answer_reaches_the_parent() {
    let mut f = fixture(
        vec![
            task("t1", "Count the lines of notes.txt and report the number."),
            // The sub-agent reads the file, then answers.
            sse(openai::tool_call(
                "c1",
                "read_file",
                &[r#"{"path": "notes.txt"}"#],
            )),
            sse(openai::text(&["notes.txt has ", "2 lines."])),
            sse(openai::text(&["The file has two lines."])),
        ],
        false,
    )
    .await;
    std::fs::write(f.ws.join("notes.txt"), "a\nb\n").unwrap();
    f.recorder.approve(true); // task_agent asks
    f.session.send("how long is notes.txt?").await.unwrap();

    let reqs = f.llm.requests();
    assert_eq!(reqs.len(), 4);
    // The parent is offered task_agent and the memory tools; the sub-agent
    // only what is meant for sub-agents.
    let parent_tools = tool_names(&reqs[0].body);
    assert!(
        parent_tools.contains(&"task_agent".to_string()),
        "{parent_tools:?}"
    );
    assert!(
        parent_tools.contains(&"memory".to_string()),
        "{parent_tools:?}"
    );
    let child_tools = tool_names(&reqs[1].body);
    for t in ["read_file", "edit_file", "bash", "search", "task_agent"] {
        assert!(child_tools.contains(&t.to_string()), "{t}: {child_tools:?}");
    }
    for t in ["memory", "recall", "skills"] {
        assert!(
            !child_tools.contains(&t.to_string()),
            "{t}: {child_tools:?}"
        );
    }
    // Its brief and the task, and nothing of the parent's conversation.
    assert!(system_text(&reqs[1].body).contains("You are a sub-agent"));
    let child_msgs = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(child_msgs.len(), 2, "{child_msgs:?}");
    assert_eq!(
        child_msgs[1]["content"],
        "Count the lines of notes.txt and report the number."
    );
    // The sub-agent's answer is the task_agent result.
    assert_eq!(tool_output(&f.llm, 3, "t1"), "notes.txt has 2 lines.");
    assert_eq!(
        f.session.turns().last().unwrap().text_content(),
        "The file has two lines."
    );
    // Its progress is nested under the parent's call.
    let events = f.recorder.events();
    let nested: Vec<&turnstone_protocol::AgentEvent> = events
        .iter()
        .filter_map(|e| match e {
            Event::AgentEvent(a) => Some(a),
            _ => None,
        })
        .collect();
    assert!(
        nested
            .iter()
            .all(|a| a.origin.parent_call_id == "t1" && a.origin.depth == 1)
    );
    let inner: Vec<&str> = nested.iter().map(|a| a.event.kind()).collect();
    for k in ["tool_info", "tool_result", "content", "state_change"] {
        assert!(inner.contains(&k), "{k} nested: {inner:?}");
    }
    let text: String = nested
        .iter()
        .filter_map(|a| match &*a.event {
            Event::Content(t) => Some(t.text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "notes.txt has 2 lines.");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::AgentContext(c) if c.parent_call_id == "t1")),
        "agent_context after the sub-agent's model calls"
    );
    // The parent's own stream has exactly the parent's content.
    assert_eq!(f.recorder.content(), "The file has two lines.");
}

#[tokio::test]
async fn a_sub_agents_risky_call_is_approved_in_the_parent_and_runs_only_then() {
    let mut f = fixture(
        vec![
            task("t1", "Create marker.txt with bash."),
            sse(openai::tool_call(
                "c1",
                "bash",
                &[r#"{"command": "echo made > marker.txt"}"#],
            )),
            sse(openai::text(&["Created."])),
            task("t2", "Create second.txt with bash."),
            sse(openai::tool_call(
                "c2",
                "bash",
                &[r#"{"command": "echo made > second.txt"}"#],
            )),
            sse(openai::text(&["Refused."])),
            sse(openai::text(&["Done with both."])),
        ],
        false,
    )
    .await;
    let ws = f.ws.clone();
    f.recorder.approve(true); // t1
    f.recorder.approve(true); // c1, the sub-agent's bash
    f.recorder.approve(true); // t2
    f.recorder.answer(turnstone_protocol::Decision {
        approved: false,
        feedback: Some("not that one".into()),
        ..Default::default()
    }); // c2
    f.session.send("make the markers").await.unwrap();
    let asks: Vec<turnstone_protocol::ApproveRequest> = f
        .recorder
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::ApproveRequest(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(asks.len(), 4, "task, its bash, task, its bash: {asks:?}");
    let bash = &asks[1].items[0];
    assert_eq!(bash.func_name, "bash");
    let origin = bash.agent.as_ref().expect("marked as the sub-agent's");
    assert_eq!((origin.parent_call_id.as_str(), origin.depth), ("t1", 1));
    assert!(asks[0].items[0].agent.is_none(), "the parent's own call");
    assert_eq!(
        asks[3].items[0].agent.as_ref().unwrap().parent_call_id,
        "t2"
    );
    // It was asked before it ran: the question precedes the nested result.
    let events = f.recorder.events();
    let asked_at = events
        .iter()
        .position(|e| matches!(e, Event::ApproveRequest(r) if r.items[0].call_id == "c1"))
        .unwrap();
    let ran_at = events
        .iter()
        .position(|e| {
            matches!(e, Event::AgentEvent(a)
            if matches!(&*a.event, Event::ToolResult(r) if r.call_id == "c1"))
        })
        .unwrap();
    assert!(asked_at < ran_at);
    assert_eq!(
        std::fs::read_to_string(ws.join("marker.txt")).unwrap(),
        "made\n"
    );
    assert!(!ws.join("second.txt").exists(), "denied: never ran");
    // The denial and its feedback reached the sub-agent's model.
    let child2 = tool_output(&f.llm, 5, "c2");
    assert!(
        child2.contains("denied") && child2.contains("not that one"),
        "{child2}"
    );
    // The parent went to attention for the sub-agent's question, then on.
    let states: Vec<SessionState> = f
        .recorder
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::StateChange(s) => Some(s.state),
            _ => None,
        })
        .collect();
    let attention = states
        .iter()
        .filter(|s| **s == SessionState::Attention)
        .count();
    assert_eq!(attention, 4, "{states:?}");
}

#[tokio::test]
async fn sub_agents_nest_two_deep_and_no_deeper() {
    let mut f = fixture(
        vec![
            task("t1", "level one"),
            task("t2", "level two"),
            // The depth-2 sub-agent is not offered task_agent; a call to it
            // anyway is refused with the reason.
            task("t3", "level three"),
            sse(openai::text(&["deepest answer"])),
            sse(openai::text(&["middle answer"])),
            sse(openai::text(&["top answer"])),
        ],
        true,
    )
    .await;
    f.session.send("go deep").await.unwrap();
    let reqs = f.llm.requests();
    assert_eq!(reqs.len(), 6);
    assert!(tool_names(&reqs[1].body).contains(&"task_agent".to_string()));
    assert!(
        !tool_names(&reqs[2].body).contains(&"task_agent".to_string()),
        "depth 2 has no task_agent: {:?}",
        tool_names(&reqs[2].body)
    );
    let refused = tool_output(&f.llm, 3, "t3");
    assert!(
        refused.contains("not available to sub-agents at depth 2")
            && refused.contains("at most 2 deep"),
        "{refused}"
    );
    assert_eq!(tool_output(&f.llm, 4, "t2"), "deepest answer");
    assert_eq!(tool_output(&f.llm, 5, "t1"), "middle answer");
    // The grandchild's events nest inside the child's: a tree under t1.
    let events = f.recorder.events();
    let outer: Vec<&turnstone_protocol::AgentEvent> = events
        .iter()
        .filter_map(|e| match e {
            Event::AgentEvent(a) => Some(a),
            _ => None,
        })
        .collect();
    assert!(
        outer
            .iter()
            .all(|a| a.origin.depth == 1 && a.origin.parent_call_id == "t1")
    );
    let inner: Vec<&turnstone_protocol::AgentEvent> = outer
        .iter()
        .filter_map(|a| match &*a.event {
            Event::AgentEvent(b) => Some(b),
            _ => None,
        })
        .collect();
    assert!(!inner.is_empty());
    assert!(
        inner
            .iter()
            .all(|b| b.origin.depth == 2 && b.origin.parent_call_id == "t2")
    );
}

#[tokio::test]
async fn cancelling_the_parent_cancels_the_sub_agent_and_kills_its_process() {
    let mut f = fixture(
        vec![
            task("t1", "run the long job"),
            sse(openai::tool_call(
                "c1",
                "bash",
                &[r#"{"command": "echo $$ > pid.txt; sleep 60"}"#],
            )),
        ],
        true,
    )
    .await;
    let cancel = f.session.cancel_handle();
    let pid_file = f.ws.join("pid.txt");
    let watcher = tokio::spawn(async move {
        for _ in 0..500 {
            if let Ok(p) = std::fs::read_to_string(&pid_file)
                && !p.trim().is_empty()
            {
                cancel.cancel();
                return p.trim().parse::<i32>().ok();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    });
    let started = std::time::Instant::now();
    let r = f.session.send("do it").await;
    assert!(
        matches!(r, Err(turnstone_engine::session::SessionError::Cancelled)),
        "{r:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    let pid = watcher
        .await
        .unwrap()
        .expect("the sub-agent's bash started");
    // The process group died with the sub-agent's cancelled call.
    let mut alive = true;
    for _ in 0..100 {
        alive = std::path::Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z ");
        if !alive {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!alive, "pid {pid} still running");
    assert_eq!(f.llm.requests().len(), 2, "no further model call");
}

#[tokio::test]
async fn a_sub_agent_stops_at_its_budget_and_its_transcript_is_kept() {
    let f = fixture(
        vec![
            task("t1", "read forever"),
            sse(openai::tool_call(
                "c1",
                "read_file",
                &[r#"{"path": "a.txt"}"#],
            )),
            sse(openai::tool_call(
                "c2",
                "read_file",
                &[r#"{"path": "a.txt"}"#],
            )),
            sse(openai::text(&["Gave up."])),
        ],
        true,
    )
    .await;
    std::fs::write(f.ws.join("a.txt"), "x\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = turnstone_storage::open(&DbConfig {
        backend: BackendKind::Sqlite,
        path: Some(dir.path().join("t.db")),
        ..Default::default()
    })
    .await
    .unwrap();
    let parent = db
        .create_workstream(&NewWorkstream {
            user_id: Some("alice".into()),
            name: "main".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    db.publish_workstream(&parent).await.unwrap();
    let cfg = SessionConfig {
        skip_permissions: true,
        acting_user_id: Some("alice".into()),
        ..f.config(&parent.ws_id)
    };
    let mut s = f
        .another(f.binding.clone(), cfg)
        .with_storage(db.clone(), parent.ws_id.clone())
        .with_agent(AgentContext {
            task_budget: Budget {
                max_model_calls: 2,
                max_tokens: 1_000_000,
            },
            ..Default::default()
        });
    s.send("try").await.unwrap();
    let out = tool_output(&f.llm, 3, "t1");
    assert!(
        out.starts_with("The sub-agent reached its budget (2 model calls"),
        "{out}"
    );
    // The sub-agent's transcript: a task_agent workstream under the parent.
    let children = db.list_children(&parent.ws_id).await.unwrap();
    assert_eq!(children.len(), 1, "{children:?}");
    let child = &children[0];
    assert_eq!(child.kind, "task_agent");
    assert_eq!(child.user_id.as_deref(), Some("alice"));
    let turns = db
        .load_turns(&child.ws_id, turnstone_storage::types::LoadMode::Resume)
        .await
        .unwrap();
    let roles: Vec<String> = turns.iter().map(|t| format!("{:?}", t.turn.role)).collect();
    assert_eq!(
        roles,
        ["User", "Assistant", "Tool", "Assistant", "Tool"],
        "the task, two calls and their results"
    );
}
