//! The conversation loop end to end: scripted LLM over loopback → real openai
//! provider component → real tool components → results back to the model.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use turnstone_engine::session::{ChatSession, ModelBinding, SessionConfig};
use turnstone_engine::turn::Role;
use turnstone_protocol::{Decision, SessionState};
use turnstone_runtime::PluginRegistry;
use turnstone_scripted_llm::{ScriptedLlm, Step, openai};
use turnstone_test_support::engine::{openai_provider, session as fixture, test_runtime};
use turnstone_test_support::sse;

/// The content of the last tool message in request `n`.
fn last_tool_result(llm: &ScriptedLlm, n: usize) -> String {
    let body = &llm.requests()[n].body;
    let msgs = body["messages"].as_array().unwrap();
    let last = msgs.last().unwrap();
    assert_eq!(
        last["role"], "tool",
        "the request ends with the tool result"
    );
    last["content"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn plain_reply_streams_and_ends_idle() {
    let mut f = fixture(vec![sse(openai::text(&["Hello", " there"]))], false).await;
    f.session.send("hi").await.unwrap();
    assert_eq!(f.recorder.content(), "Hello there");
    let turns = f.session.turns();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[1].role, Role::Assistant);
    assert_eq!(turns[1].text_content(), "Hello there");
    assert_eq!(f.recorder.states().last(), Some(&SessionState::Idle));
    let req = &f.llm.requests()[0];
    assert_eq!(req.body["messages"][0]["content"], "hi");
    let tool_names: Vec<&str> = req.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tool_names.contains(&"read_file"), "{tool_names:?}");
}

#[tokio::test]
async fn auto_approved_tool_runs_and_its_result_reaches_the_model() {
    let mut f = fixture(
        vec![
            sse(openai::tool_call(
                "call_1",
                "read_file",
                &["{\"path\":", " \"notes.txt\"}"],
            )),
            sse(openai::text(&["The file says alpha."])),
        ],
        false,
    )
    .await;
    std::fs::write(f.ws.join("notes.txt"), "alpha\n").unwrap();
    f.session.send("what is in notes.txt?").await.unwrap();
    assert!(
        f.recorder.prompts().is_empty(),
        "read_file is auto-approved"
    );
    let reqs = f.llm.requests();
    assert_eq!(reqs.len(), 2);
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(
        msgs[1]["tool_calls"][0]["function"]["arguments"],
        "{\"path\": \"notes.txt\"}"
    );
    assert_eq!(msgs[2]["role"], "tool");
    assert_eq!(msgs[2]["tool_call_id"], "call_1");
    assert_eq!(msgs[2]["content"], "     1\talpha\n");
    assert_eq!(
        f.session.turns().last().unwrap().text_content(),
        "The file says alpha."
    );
}

#[tokio::test]
async fn approval_with_feedback_always_and_denial() {
    let mut f = fixture(Vec::new(), false).await;
    let write = |id: &str, path: &Path| {
        let args = serde_json::json!({"path": path, "content": "x"}).to_string();
        sse(openai::tool_call(id, "write", &[&args]))
    };
    let (a, b) = (f.ws.join("a.txt"), f.ws.join("b.txt"));
    f.llm.push(write("call_1", &a));
    f.llm.push(sse(openai::text(&["ok"])));
    f.llm.push(write("call_2", &b));
    f.llm.push(sse(openai::text(&["ok again"])));

    // y + feedback + always: runs, the model sees the feedback.
    f.recorder.answer(Decision {
        approved: true,
        always: true,
        feedback: Some("use small files".into()),
    });
    f.session.send("write a").await.unwrap();
    assert!(a.exists());
    {
        let prompts = f.recorder.prompts();
        assert_eq!(prompts.len(), 1);
        assert_eq!(prompts[0].cycle_id.len(), 32, "cycle ids are 32 hex");
        assert!(prompts[0].items[0].needs_approval);
        assert_eq!(prompts[0].items[0].func_name, "write");
    }
    let second = &f.llm.requests()[1];
    let tool_msg = &second.body["messages"][2];
    assert_eq!(
        tool_msg["content"],
        "written\n\nUser feedback: use small files"
    );

    // "always" covers the next call of the same tool: no prompt.
    f.session.send("write b").await.unwrap();
    assert!(b.exists());
    assert_eq!(f.recorder.prompts().len(), 1);
}

#[tokio::test]
async fn denial_bad_arguments_and_unknown_tools_become_error_results() {
    let mut f = fixture(Vec::new(), false).await;
    let c = f.ws.join("c.txt");
    let args = serde_json::json!({"path": c, "content": "x"}).to_string();
    f.llm
        .push(sse(openai::tool_call("call_1", "write", &[&args])));
    f.llm.push(sse(openai::text(&["understood"])));
    f.llm
        .push(sse(openai::tool_call("call_2", "no_such_tool", &["{}"])));
    f.llm.push(sse(openai::text(&["sorry"])));
    f.llm
        .push(sse(openai::tool_call("call_3", "read_file", &["[1, 2]"])));
    f.llm.push(sse(openai::text(&["fine"])));

    f.recorder.answer(Decision {
        approved: false,
        always: false,
        feedback: Some("not now".into()),
    });
    f.session.send("write c").await.unwrap();
    assert!(!c.exists(), "a denied call never runs");
    let denied = &f.llm.requests()[1].body["messages"][2]["content"];
    assert_eq!(
        denied,
        "The user denied this tool call; it did not run.\n\nUser feedback: not now"
    );

    f.session.send("call something odd").await.unwrap();
    assert_eq!(
        last_tool_result(&f.llm, 3),
        "Error: unknown tool \"no_such_tool\""
    );

    f.session.send("read with bad args").await.unwrap();
    let bad = last_tool_result(&f.llm, 5);
    assert!(
        bad.starts_with("Error: arguments for read_file must be a JSON object"),
        "{bad}"
    );
    let errors: Vec<bool> = f.recorder.results().iter().map(|r| r.1).collect();
    assert_eq!(errors, [true, true, true]);
}

#[tokio::test]
async fn every_refusal_path_reaches_the_model_with_one_error_prefix() {
    let mut f = fixture(Vec::new(), false).await;
    std::fs::write(f.ws.join("e.txt"), "v1\n").unwrap();
    let edit =
        serde_json::json!({"path": "e.txt", "old_string": "v1", "new_string": "v2"}).to_string();
    let calls: Vec<(&str, String, &str)> = vec![
        ("no_such_tool", "{}".into(), "Error: unknown tool"),
        (
            "read_file",
            "[1, 2]".into(),
            "Error: arguments for read_file",
        ),
        (
            "read_file",
            r#"{"path": 5}"#.into(),
            "Error: invalid arguments for read_file",
        ),
        ("edit_file", edit.clone(), "Error: read "),
        ("read_file", r#"{"path": "missing.txt"}"#.into(), "Error: "),
        (
            "bash",
            r#"{"command": "cat /proc/1/environ"}"#.into(),
            "Error: Blocked:",
        ),
        (
            "bash",
            r#"{"command": "echo x", "timeout": 0}"#.into(),
            "Error: timeout must be",
        ),
    ];
    for (i, (tool, args, _)) in calls.iter().enumerate() {
        f.llm
            .push(sse(openai::tool_call(&format!("call_{i}"), tool, &[args])));
        f.llm.push(sse(openai::text(&["ok"])));
    }
    for (i, (tool, _, want)) in calls.iter().enumerate() {
        f.session.send(&format!("try {tool}")).await.unwrap();
        let out = last_tool_result(&f.llm, 2 * i + 1);
        assert!(out.starts_with(want), "{tool}: {out}");
        assert_eq!(out.matches("Error:").count(), 1, "{tool}: {out}");
    }
    // A file deleted between approval and execution: the same format.
    f.llm.push(sse(openai::tool_call(
        "call_r",
        "read_file",
        &[r#"{"path": "e.txt"}"#],
    )));
    f.llm
        .push(sse(openai::tool_call("call_e", "edit_file", &[&edit])));
    f.llm.push(sse(openai::text(&["done"])));
    let doomed = f.ws.join("e.txt");
    f.recorder
        .on_next_prompt(move |_| std::fs::remove_file(&doomed).unwrap());
    f.recorder.answer(Decision {
        approved: true,
        always: false,
        feedback: None,
    });
    f.session.send("edit e").await.unwrap();
    let n = f.llm.requests().len();
    let out = last_tool_result(&f.llm, n - 1);
    assert!(out.starts_with("Error: file not found: "), "{out}");
    assert_eq!(out.matches("Error:").count(), 1, "{out}");
    // The front end got the same texts as the model, all marked as errors.
    let results = f.recorder.results();
    let errors: Vec<&(String, bool)> = results.iter().filter(|r| r.1).collect();
    assert_eq!(errors.len(), calls.len() + 1, "{results:?}");
    assert!(
        errors
            .iter()
            .all(|(o, _)| o.starts_with("Error: ") && o.matches("Error:").count() == 1)
    );
}

#[tokio::test]
async fn skip_permissions_runs_without_prompting() {
    let mut f = fixture(Vec::new(), true).await;
    let d = f.ws.join("d.txt");
    let args = serde_json::json!({"path": d, "content": "x"}).to_string();
    f.llm
        .push(sse(openai::tool_call("call_1", "write", &[&args])));
    f.llm.push(sse(openai::text(&["done"])));
    f.session.send("write d").await.unwrap();
    assert!(d.exists());
    assert!(f.recorder.prompts().is_empty());
}

#[tokio::test]
async fn a_provider_error_surfaces_and_sets_the_error_state() {
    let mut f = fixture(
        vec![Step::Status {
            status: 401,
            headers: Vec::new(),
            body: r#"{"error":{"message":"bad key"}}"#.into(),
        }],
        false,
    )
    .await;
    let err = f.session.send("hi").await.unwrap_err();
    // Typed to the edge: the WIT provider-error, not a string.
    match &err {
        turnstone_engine::session::SessionError::Provider(
            turnstone_runtime::provider_error::ProviderError::Auth(m),
        ) => assert!(m.contains("bad key"), "{m}"),
        other => panic!("expected a provider auth error, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "model request failed: authentication failed: bad key"
    );
    assert_eq!(f.recorder.states().last(), Some(&SessionState::Error));
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried_with_backoff() {
    let mut f = fixture(
        vec![
            Step::Status {
                status: 429,
                headers: vec![("retry-after".into(), "0.3".into())],
                body: r#"{"error":{"message":"slow down"}}"#.into(),
            },
            Step::Status {
                status: 503,
                headers: Vec::new(),
                body: "busy".into(),
            },
            Step::Disconnect {
                frames: openai::text(&["par"])[..2].to_vec(),
            },
            sse(openai::text(&["finally"])),
        ],
        false,
    )
    .await;
    let started = std::time::Instant::now();
    f.session.send("hi").await.unwrap();
    let took = started.elapsed();
    assert_eq!(f.llm.requests().len(), 4, "three failures, then success");
    // retry-after 0.3 s beats the 20 ms backoff; the 503 waits 40 ms; the broken
    // stream is re-issued after half the base (10 ms) without using a retry.
    assert!(took >= Duration::from_millis(300 + 40 + 10), "{took:?}");
    assert_eq!(f.session.turns().last().unwrap().text_content(), "finally");
}

#[tokio::test]
async fn retries_stop_after_four_attempts_and_auth_errors_are_not_retried() {
    let fail = || Step::Status {
        status: 500,
        headers: Vec::new(),
        body: "down".into(),
    };
    let mut f = fixture(vec![fail(), fail(), fail(), fail()], false).await;
    let err = f.session.send("hi").await.unwrap_err();
    assert!(err.to_string().contains("500"), "{err}");
    assert_eq!(f.llm.requests().len(), 4);

    let mut g = fixture(
        vec![Step::Status {
            status: 401,
            headers: Vec::new(),
            body: "{}".into(),
        }],
        false,
    )
    .await;
    assert!(g.session.send("hi").await.is_err());
    assert_eq!(g.llm.requests().len(), 1, "auth errors are final");
}

#[tokio::test]
async fn an_unreachable_primary_falls_back_to_the_next_model() {
    let f = fixture(vec![sse(openai::text(&["from the fallback"]))], false).await;
    // The primary points at a port nothing listens on (and is granted for it).
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_port = dead.local_addr().unwrap().port();
    drop(dead);
    let dead_provider = openai_provider(&test_runtime(), &[dead_port]).await;
    let primary = ModelBinding {
        plugin: Arc::new(dead_provider),
        base_url: format!("http://127.0.0.1:{dead_port}/v1"),
        model: "primary-model".into(),
        ..f.binding.clone()
    };
    let sink = f.sink.clone();
    let tools = Arc::new(PluginRegistry::default());
    let mut session = ChatSession::new(
        primary,
        tools,
        sink.clone(),
        SessionConfig {
            retry_base: Duration::from_millis(5),
            ..SessionConfig::new("ws_fb", f.ws.clone())
        },
    )
    .with_fallbacks(vec![f.binding.clone()]);
    session.send("hi").await.unwrap();
    assert_eq!(
        session.turns().last().unwrap().text_content(),
        "from the fallback"
    );
    assert_eq!(f.llm.requests().len(), 1);
    assert_eq!(f.llm.requests()[0].body["model"], "gpt-4o-mini");
}

async fn sqlite() -> (tempfile::TempDir, turnstone_storage::Storage) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = turnstone_storage::DbConfig {
        path: Some(dir.path().join("s.db")),
        ..Default::default()
    };
    (dir, turnstone_storage::open(&cfg).await.unwrap())
}

async fn new_workstream(db: &turnstone_storage::Storage) -> String {
    use turnstone_storage::prelude::*;
    let r = db
        .create_workstream(&NewWorkstream::default())
        .await
        .unwrap();
    db.publish_workstream(&r).await.unwrap();
    r.ws_id
}

#[tokio::test]
async fn every_turn_persists_and_a_resumed_session_continues() {
    use turnstone_storage::prelude::*;
    let (_d, db) = sqlite().await;
    let ws = new_workstream(&db).await;
    let f = fixture(Vec::new(), false).await;
    std::fs::write(f.ws.join("n.txt"), "beta\n").unwrap();
    f.llm.push(sse(openai::tool_call(
        "call_1",
        "read_file",
        &["{\"path\": \"n.txt\"}"],
    )));
    f.llm.push(sse(openai::text(&["It says beta."])));
    f.llm.push(sse(openai::text(&["You asked about n.txt."])));
    let session = ChatSession::new(
        f.binding.clone(),
        f.tools.clone(),
        f.sink.clone(),
        SessionConfig::new(ws.clone(), f.ws.clone()),
    )
    .with_storage(db.clone(), ws.clone());
    let mut session = session;
    session.send("read n.txt").await.unwrap();
    let rows = db.load_turns(&ws, LoadMode::Resume).await.unwrap();
    let roles: Vec<Role> = rows.iter().map(|r| r.turn.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert_eq!(
        rows[1]
            .turn
            .tool_calls
            .as_deref()
            .map(|t| t.contains("{\\\"path\\\": \\\"n.txt\\\"}")),
        Some(true)
    );
    assert_eq!(rows[2].turn.content.as_deref(), Some("     1\tbeta\n"));
    drop(session);

    // A new process: resume from storage and continue the same conversation.
    let mut resumed = ChatSession::new(
        f.binding.clone(),
        f.tools.clone(),
        f.sink.clone(),
        SessionConfig::new(ws.clone(), f.ws.clone()),
    )
    .with_storage(db.clone(), ws.clone())
    .resume()
    .await
    .unwrap();
    assert_eq!(resumed.turns().len(), 4);
    resumed.send("what did I ask?").await.unwrap();
    let last_req = f.llm.requests().pop().unwrap();
    let msgs = last_req.body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 5, "the whole history goes back to the model");
    assert_eq!(msgs[2]["content"], "     1\tbeta\n");
    assert_eq!(db.count_turns(&ws).await.unwrap(), 6);
}

#[tokio::test]
async fn an_interrupted_tool_batch_is_repaired_on_resume() {
    use turnstone_storage::prelude::*;
    let (_d, db) = sqlite().await;
    let ws = new_workstream(&db).await;
    // What a killed process leaves behind: tool calls without results.
    db.save_turn(&ws, &NewTurn::text(Role::User, "run two things"))
        .await
        .unwrap();
    db.save_turn(
        &ws,
        &NewTurn {
            tool_calls: Some(r#"[{"id":"call_1","name":"write","arguments":"{}"},{"id":"call_2","name":"write","arguments":"{}"}]"#.into()),
            ..NewTurn::text(Role::Assistant, "")
        },
    )
    .await
    .unwrap();
    let f = fixture(
        vec![sse(openai::text(&["Let me check what happened."]))],
        false,
    )
    .await;
    let mut s = ChatSession::new(
        f.binding.clone(),
        f.tools.clone(),
        f.sink.clone(),
        SessionConfig::new(ws.clone(), f.ws.clone()),
    )
    .with_storage(db.clone(), ws.clone())
    .resume()
    .await
    .unwrap();
    s.send("did it work?").await.unwrap();
    let msgs = f.llm.requests()[0].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool", "user"]);
    assert!(
        msgs[2]["content"]
            .as_str()
            .unwrap()
            .starts_with("Tool execution was cancelled. Outcome UNKNOWN")
    );
    assert_eq!(msgs[3]["tool_call_id"], "call_2");
}

#[tokio::test]
async fn a_storage_failure_is_reported_and_the_turn_kept_in_memory() {
    let (_d, db) = sqlite().await;
    let f = fixture(Vec::new(), false).await;
    // The workstream does not exist: every save fails with a typed error.
    let mut s = ChatSession::new(
        f.binding.clone(),
        f.tools.clone(),
        f.sink.clone(),
        SessionConfig::new("ghost", f.ws.clone()),
    )
    .with_storage(db, "ghost");
    let err = s.send("hello").await.unwrap_err();
    assert!(
        err.to_string().contains("unknown workstream ghost"),
        "{err}"
    );
    assert_eq!(s.turns().len(), 1, "nothing is lost from memory");
    assert!(
        f.llm.requests().is_empty(),
        "no model call after a failed save"
    );
    assert_eq!(f.recorder.states().last(), Some(&SessionState::Error));
}

#[tokio::test]
async fn cancel_mid_stream_keeps_the_partial_text_marked_interrupted() {
    let mut f = fixture(
        vec![Step::Sse {
            frames: openai::text(&["one ", "two ", "three ", "four"]),
            gap: Duration::from_millis(250),
        }],
        false,
    )
    .await;
    let cancel = f.session.cancel_handle();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        cancel.cancel();
    });
    let started = std::time::Instant::now();
    let err = f.session.send("count").await.unwrap_err();
    assert!(
        matches!(err, turnstone_engine::session::SessionError::Cancelled),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    let last = f.session.turns().last().unwrap().clone();
    assert_eq!(last.role, Role::Assistant);
    assert!(last.meta.interrupted);
    let text = last.text_content();
    assert!(
        text.starts_with("one ") && !text.contains("four"),
        "{text:?}"
    );
    assert_eq!(f.recorder.states().last(), Some(&SessionState::Idle));
}

#[tokio::test]
async fn cancel_mid_tool_records_unknown_and_unstarted_calls_as_none() {
    use turnstone_engine::turn::EffectStatus;
    let mut f = fixture(Vec::new(), true).await;
    f.llm.push(sse(openai::tool_call(
        "call_1",
        "sleep",
        &["{\"ms\": 20000}"],
    )));
    let cancel = f.session.cancel_handle();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.cancel();
    });
    let started = std::time::Instant::now();
    assert!(f.session.send("sleep").await.is_err());
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let last = f.session.turns().last().unwrap().clone();
    assert_eq!(last.role, Role::Tool);
    assert_eq!(
        last.meta.effect,
        Some(EffectStatus::Unknown),
        "it may have run"
    );
    assert!(
        last.text_content()
            .starts_with("Tool execution was cancelled. Outcome UNKNOWN")
    );
    assert_eq!(f.llm.requests().len(), 1, "no model call after a cancel");

    // Cancelled while waiting for approval: nothing started.
    let mut g = fixture(Vec::new(), false).await;
    let path = g.ws.join("never.txt");
    let args = serde_json::json!({"path": path, "content": "x"}).to_string();
    g.llm
        .push(sse(openai::tool_call("call_9", "write", &[&args])));
    let cancel = g.session.cancel_handle();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    assert!(g.session.send("write").await.is_err());
    let last = g.session.turns().last().unwrap().clone();
    assert_eq!(last.meta.effect, Some(EffectStatus::None));
    assert!(!path.exists());
    // The next send works normally on a fresh turn.
    g.llm.push(sse(openai::text(&["ready"])));
    g.session.send("again").await.unwrap();
    assert_eq!(g.session.turns().last().unwrap().text_content(), "ready");
}

#[tokio::test]
async fn max_concurrency_admits_one_generation_at_a_time() {
    let f = fixture(Vec::new(), false).await;
    for _ in 0..2 {
        f.llm.push(Step::Sse {
            frames: openai::text(&["a", "b", "c"]),
            gap: Duration::from_millis(200),
        });
    }
    let gate = Arc::new(tokio::sync::Semaphore::new(1));
    let binding = ModelBinding {
        admission: Some(gate.clone()),
        ..f.binding.clone()
    };
    let mut tasks = Vec::new();
    for i in 0..2 {
        let mut s = ChatSession::new(
            binding.clone(),
            f.tools.clone(),
            f.sink.clone(),
            SessionConfig::new(format!("ws{i}"), f.ws.clone()),
        );
        tasks.push(tokio::spawn(async move {
            s.send("go").await.map(|_| s.turns().len())
        }));
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        f.llm.requests().len(),
        1,
        "the second generation waits for the first"
    );
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), 2);
    }
    assert_eq!(f.llm.requests().len(), 2);
    assert_eq!(gate.available_permits(), 1, "permits are returned");
}

#[tokio::test]
async fn a_registry_alias_becomes_a_working_binding() {
    use turnstone_engine::models::{CliModel, ModelRegistry, ModelsConfig};
    let f = fixture(vec![sse(openai::text(&["via alias"]))], false).await;
    let cfg: ModelsConfig = toml::from_str(&format!(
        "[models.local]\nprovider = \"openai-compatible\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\napi_key = \"${{SCRIPTED_KEY}}\"\nmax_concurrency = 2\n",
        f.llm.base_url()
    ))
    .unwrap();
    let env = |k: &str| (k == "SCRIPTED_KEY").then(|| "sk-from-env".to_string());
    let registry = ModelRegistry::build(&cfg, &CliModel::default(), &env, None).unwrap();
    let alias = registry.alias(&registry.default).unwrap();
    assert_eq!(
        registry.provider_grants()["openai"].http,
        [format!("127.0.0.1:{}", f.llm.port())]
    );
    let binding = ModelBinding::from_alias(alias, f.binding.plugin.clone());
    let mut s = ChatSession::new(
        binding,
        f.tools.clone(),
        f.sink.clone(),
        SessionConfig::new("ws_alias", f.ws.clone()),
    );
    s.send("hi").await.unwrap();
    let req = &f.llm.requests()[0];
    assert_eq!(req.header("authorization"), Some("Bearer sk-from-env"));
    assert_eq!(req.body["model"], "m");
    assert_eq!(
        req.body["max_tokens"], 4096,
        "openai-compatible sends max_tokens"
    );
}

#[tokio::test]
async fn auto_compaction_summarizes_and_checkpoints_while_keeping_sources() {
    use turnstone_engine::session::{COMPACTION_LABEL, COMPACTION_PROMPT};
    use turnstone_storage::prelude::*;
    let (_d, db) = sqlite().await;
    let ws = new_workstream(&db).await;
    let f = fixture(Vec::new(), false).await;
    f.llm.push(sse(openai::text(&["first reply"])));
    f.llm.push(sse(openai::text(&["SUMMARY: user said hi"])));
    f.llm.push(sse(openai::text(&["second reply"])));
    // 11 prompt tokens of a 100-token window is over the 10 % threshold.
    let binding = f.binding.clone().with_context_window(100);
    let mut s = ChatSession::new(
        binding,
        f.tools.clone(),
        f.sink.clone(),
        SessionConfig {
            auto_compact_pct: 10,
            ..SessionConfig::new(ws.clone(), f.ws.clone())
        },
    )
    .with_storage(db.clone(), ws.clone());
    s.send("hi").await.unwrap();
    s.send("next").await.unwrap();
    let reqs = f.llm.requests();
    assert_eq!(reqs.len(), 3);
    let summary_req = &reqs[1].body;
    assert_eq!(
        summary_req["messages"].as_array().unwrap().last().unwrap()["content"],
        COMPACTION_PROMPT
    );
    assert!(
        summary_req.get("tools").is_none(),
        "no tools while summarizing"
    );
    let after: Vec<String> = reqs[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(after, [COMPACTION_LABEL, "SUMMARY: user said hi", "next"]);
    // Storage: the resume view starts at the checkpoint; the transcript keeps every source turn.
    let resume: Vec<String> = db
        .load_turns(&ws, LoadMode::Resume)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.turn.content.unwrap())
        .collect();
    assert_eq!(
        resume,
        [
            COMPACTION_LABEL,
            "SUMMARY: user said hi",
            "next",
            "second reply"
        ]
    );
    assert_eq!(
        db.load_turns(&ws, LoadMode::Transcript)
            .await
            .unwrap()
            .len(),
        4
    );
    // A resumed session continues from the summary.
    let resumed = ChatSession::new(
        f.binding.clone(),
        f.tools.clone(),
        f.sink.clone(),
        SessionConfig::new(ws.clone(), f.ws.clone()),
    )
    .with_storage(db.clone(), ws.clone())
    .resume()
    .await
    .unwrap();
    assert_eq!(resumed.turns().len(), 4);
    assert_eq!(resumed.turns()[1].text_content(), "SUMMARY: user said hi");
}

#[tokio::test]
async fn compaction_mid_tool_loop_keeps_the_in_flight_batch_verbatim() {
    use turnstone_engine::session::{COMPACTION_LABEL, COMPACTION_PROMPT};
    use turnstone_storage::prelude::*;
    let (_d, db) = sqlite().await;
    let ws = new_workstream(&db).await;
    let f = fixture(Vec::new(), false).await;
    std::fs::write(f.ws.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(f.ws.join("b.txt"), "beta\n").unwrap();
    f.llm.push(sse(openai::tool_call(
        "call_a",
        "read_file",
        &["{\"path\":\"a.txt\"}"],
    )));
    f.llm.push(sse(openai::tool_call(
        "call_b",
        "read_file",
        &["{\"path\":\"b.txt\"}"],
    )));
    f.llm
        .push(sse(openai::text(&["SUMMARY: read a.txt (alpha)"])));
    f.llm.push(sse(openai::text(&["a is alpha, b is beta"])));
    let binding = f.binding.clone().with_context_window(100);
    let mut s = ChatSession::new(
        binding,
        f.tools.clone(),
        f.sink.clone(),
        SessionConfig {
            auto_compact_pct: 10,
            ..SessionConfig::new(ws.clone(), f.ws.clone())
        },
    )
    .with_storage(db.clone(), ws.clone());
    s.send("read both files").await.unwrap();
    let reqs = f.llm.requests();
    assert_eq!(reqs.len(), 4, "two tool turns, one summary, the answer");
    // The first tool turn already crossed the threshold, but the loop only
    // compacts after the second batch's results are in.
    let summary_msgs = reqs[2].body["messages"].as_array().unwrap();
    assert_eq!(summary_msgs.last().unwrap()["content"], COMPACTION_PROMPT);
    assert!(
        summary_msgs.iter().all(|m| m["tool_call_id"] != "call_b"),
        "the in-flight batch is not summarized: {summary_msgs:?}"
    );
    let after = reqs[3].body["messages"].as_array().unwrap();
    assert_eq!(after[0]["content"], COMPACTION_LABEL);
    assert_eq!(after[1]["content"], "SUMMARY: read a.txt (alpha)");
    assert_eq!(
        after[2]["content"], "read both files",
        "the request is carried"
    );
    assert_eq!(after[3]["tool_calls"][0]["id"], "call_b");
    assert_eq!(after[4]["tool_call_id"], "call_b");
    assert_eq!(after[4]["content"], "     1\tbeta\n");
    assert_eq!(after.len(), 5);
    assert!(
        reqs[3].body.get("tools").is_some(),
        "tools are back after the summary"
    );
    // Resume sees the same view: summary, carried request, verbatim tail, answer.
    let resumed = ChatSession::new(
        f.binding.clone(),
        f.tools.clone(),
        f.sink.clone(),
        SessionConfig::new(ws.clone(), f.ws.clone()),
    )
    .with_storage(db.clone(), ws.clone())
    .resume()
    .await
    .unwrap();
    let view: Vec<String> = resumed.turns().iter().map(|t| t.text_content()).collect();
    assert_eq!(
        view,
        [
            COMPACTION_LABEL,
            "SUMMARY: read a.txt (alpha)",
            "read both files",
            "",
            "     1\tbeta\n",
            "a is alpha, b is beta"
        ]
    );
    assert_eq!(resumed.turns()[3].tool_calls[0].id, "call_b");
    // Every source turn stays in the transcript.
    let transcript = db.load_turns(&ws, LoadMode::Transcript).await.unwrap();
    assert_eq!(transcript.len(), 6);
}

#[tokio::test]
async fn compaction_on_demand_and_an_empty_summary_is_refused() {
    let mut f = fixture(Vec::new(), false).await;
    f.llm.push(sse(openai::text(&["reply"])));
    f.session.send("hello").await.unwrap();
    f.llm.push(sse(openai::text(&[""])));
    let err = f.session.compact().await.unwrap_err();
    assert!(err.to_string().contains("empty summary"), "{err}");
    assert_eq!(f.session.turns().len(), 2, "nothing replaced on failure");
    f.llm.push(sse(openai::text(&["the gist"])));
    f.session.compact().await.unwrap();
    let texts: Vec<String> = f.session.turns().iter().map(|t| t.text_content()).collect();
    assert_eq!(
        texts,
        [turnstone_engine::session::COMPACTION_LABEL, "the gist"]
    );
}

#[tokio::test]
async fn a_message_queued_during_a_tool_run_joins_at_the_tool_result_seam() {
    use turnstone_engine::session::{MAX_QUEUED, QueueFull};
    let mut f = fixture(Vec::new(), true).await;
    f.llm.push(sse(openai::tool_call(
        "call_1",
        "sleep",
        &["{\"ms\": 400}"],
    )));
    f.llm.push(sse(openai::text(&["noted"])));
    let queue = f.session.queue();
    let q2 = queue.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        q2.push("q1", "also check the logs").unwrap();
    });
    f.session.send("wait a bit").await.unwrap();
    let msgs = f.llm.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let shape: Vec<(String, String)> = msgs
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(shape[2].0, "tool");
    assert_eq!(
        shape[3],
        ("user".to_string(), "also check the logs".to_string())
    );
    assert!(queue.is_empty());
    for i in 0..MAX_QUEUED {
        assert_eq!(queue.push(format!("id{i}"), format!("m{i}")), Ok(i + 1));
    }
    assert_eq!(queue.push("id-x", "one too many"), Err(QueueFull));
    assert_eq!(queue.remove("id3").as_deref(), Some("m3"));
    assert_eq!(queue.remove("id3"), None, "removed once");
    assert_eq!(queue.pop().as_deref(), Some("m0"));
}

#[tokio::test]
async fn broken_streams_are_reissued_without_using_up_retries() {
    let broken = || Step::Disconnect {
        frames: openai::text(&["part"])[..2].to_vec(),
    };
    // Five mid-stream deaths: attempt 1 = 3 tries (2 re-issues), attempt 2 dies
    // twice and then succeeds. A single 4-attempt ladder would have given up.
    let mut f = fixture(
        vec![
            broken(),
            broken(),
            broken(),
            broken(),
            broken(),
            sse(openai::text(&["whole"])),
        ],
        false,
    )
    .await;
    f.session.send("hi").await.unwrap();
    assert_eq!(f.llm.requests().len(), 6);
    assert_eq!(f.session.turns().last().unwrap().text_content(), "whole");

    // A failure before any event is a plain retry: 4 attempts in all.
    let refused = || Step::Status {
        status: 502,
        headers: Vec::new(),
        body: "bad gateway".into(),
    };
    let mut g = fixture(vec![refused(), refused(), refused(), refused()], false).await;
    assert!(g.session.send("hi").await.is_err());
    assert_eq!(g.llm.requests().len(), 4);
}

#[tokio::test]
async fn a_session_killed_mid_tool_resumes_with_the_batch_repaired() {
    use std::io::BufRead;
    use turnstone_storage::prelude::*;
    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("crash.db");
    let db = turnstone_storage::open(&DbConfig {
        path: Some(db_path.clone()),
        ..Default::default()
    })
    .await
    .unwrap();
    let ws = new_workstream(&db).await;
    let f = fixture(Vec::new(), false).await;
    f.llm.push(sse(openai::tool_call(
        "call_long",
        "sleep",
        &["{\"ms\": 60000}"],
    )));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_engine-crash-session"))
        .args([
            turnstone_test_support::target().to_str().unwrap(),
            db_path.to_str().unwrap(),
            &ws,
            &format!("{}/v1", f.llm.base_url()),
            &f.llm.port().to_string(),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let saw_running = tokio::task::spawn_blocking(move || {
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|l| l == "RUNNING")
    });
    assert!(
        tokio::time::timeout(Duration::from_secs(60), saw_running)
            .await
            .unwrap()
            .unwrap()
    );
    child.kill().unwrap(); // SIGKILL while the tool runs
    child.wait().unwrap();

    // What the killed process persisted: the user turn and the assistant's call.
    let rows = db.load_turns(&ws, LoadMode::Resume).await.unwrap();
    assert_eq!(
        rows.iter().map(|r| r.turn.role).collect::<Vec<_>>(),
        [Role::User, Role::Assistant]
    );

    // Resume in a new session and continue: the unanswered call is repaired.
    f.llm.push(sse(openai::text(&[
        "The job was interrupted; let me check its state.",
    ])));
    let mut s = ChatSession::new(
        f.binding.clone(),
        f.tools.clone(),
        f.sink.clone(),
        SessionConfig::new(ws.clone(), f.ws.clone()),
    )
    .with_storage(db.clone(), ws.clone())
    .resume()
    .await
    .unwrap();
    s.send("what happened?").await.unwrap();
    let msgs = f.llm.requests().last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "user"]);
    assert_eq!(msgs[2]["tool_call_id"], "call_long");
    assert!(
        msgs[2]["content"]
            .as_str()
            .unwrap()
            .contains("Outcome UNKNOWN")
    );
    assert_eq!(db.count_turns(&ws).await.unwrap(), 4);
}

#[tokio::test]
async fn a_registry_reload_applies_from_the_next_turn_and_spares_the_one_in_flight() {
    use std::collections::BTreeMap;
    use turnstone_engine::models::{CliModel, LiveModels, ModelRegistry, ModelsConfig};
    let f = fixture(Vec::new(), false).await;
    let b = ScriptedLlm::start(vec![sse(openai::text(&["from B"]))])
        .await
        .unwrap();
    f.llm.push(sse(openai::text(&["from A"])));
    f.llm.push(Step::Sse {
        frames: openai::text(&["slow ", "A ", "reply"]),
        gap: Duration::from_millis(150),
    });
    // One provider component granted both servers.
    let openai_plugin = openai_provider(&test_runtime(), &[f.llm.port(), b.port()]).await;
    let registry = |url: String| {
        let cfg: ModelsConfig = toml::from_str(&format!(
            "[models.main]\nprovider = \"openai-compatible\"\nbase_url = \"{url}/v1\"\nmodel = \"m\"\n"
        ))
        .unwrap();
        ModelRegistry::build(&cfg, &CliModel::default(), &|_| None, None).unwrap()
    };
    let live = LiveModels::new(
        registry(f.llm.base_url()),
        BTreeMap::from([("openai".to_string(), Arc::new(openai_plugin))]),
    );
    let mut s = ChatSession::new(
        f.binding.clone(),
        f.tools.clone(),
        f.sink.clone(),
        SessionConfig::new("ws_live", f.ws.clone()),
    )
    .with_live_models(live.clone(), None);
    s.send("one").await.unwrap();
    assert_eq!(s.turns().last().unwrap().text_content(), "from A");
    let in_flight = tokio::spawn(async move {
        s.send("two").await.unwrap();
        s
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    live.reload(registry(b.base_url()));
    let mut s = in_flight.await.unwrap();
    assert_eq!(
        s.turns().last().unwrap().text_content(),
        "slow A reply",
        "the turn in flight finished on A"
    );
    s.send("three").await.unwrap();
    assert_eq!(s.turns().last().unwrap().text_content(), "from B");
    assert_eq!((f.llm.requests().len(), b.requests().len()), (2, 1));
}

#[tokio::test]
async fn the_model_reads_edits_and_runs_through_the_workspace_tools() {
    let mut f = fixture(
        vec![
            sse(openai::tool_call(
                "call_r",
                "read_file",
                &["{\"path\":\"app.cfg\"}"],
            )),
            sse(openai::tool_call(
                "call_e",
                "edit_file",
                &[
                    "{\"path\":\"app.cfg\",",
                    "\"old_string\":\"port = 80\",\"new_string\":\"port = 8080\"}",
                ],
            )),
            sse(openai::tool_call(
                "call_b",
                "bash",
                &["{\"command\":\"grep port app.cfg && wc -l < app.cfg\"}"],
            )),
            sse(openai::text(&["The port is now 8080."])),
        ],
        true,
    )
    .await;
    std::fs::write(f.ws.join("app.cfg"), "name = demo\nport = 80\n").unwrap();
    f.session.send("switch the app to port 8080").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(f.ws.join("app.cfg")).unwrap(),
        "name = demo\nport = 8080\n"
    );
    let reqs = f.llm.requests();
    assert_eq!(reqs.len(), 4);
    let tool_result = |req: usize, id: &str| -> String {
        reqs[req].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["tool_call_id"] == id)
            .map(|m| m["content"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("no result for {id}"))
    };
    assert_eq!(
        tool_result(1, "call_r"),
        "     1\tname = demo\n     2\tport = 80\n"
    );
    assert!(
        tool_result(2, "call_e").starts_with("Edited "),
        "{}",
        tool_result(2, "call_e")
    );
    assert_eq!(tool_result(3, "call_b"), "port = 8080\n2\n");
    let names: Vec<String> = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    for tool in [
        "bash",
        "bash_output",
        "kill_shell",
        "read_file",
        "write_file",
        "edit_file",
        "diff_file",
        "search",
        "web_fetch",
        "web_search",
    ] {
        assert!(names.iter().any(|n| n == tool), "{tool} offered: {names:?}");
    }
    assert_eq!(
        f.session.turns().last().unwrap().text_content(),
        "The port is now 8080."
    );
}

#[tokio::test]
async fn rewind_retry_and_clear_edit_memory_and_storage_together() {
    use turnstone_engine::session::{EditError, SessionError};
    use turnstone_storage::prelude::*;
    let (_d, db) = sqlite().await;
    let ws = new_workstream(&db).await;
    let f = fixture(Vec::new(), false).await;
    for reply in ["one", "two", "three"] {
        f.llm.push(sse(openai::text(&[reply])));
    }
    let mut s = ChatSession::new(
        f.binding.clone(),
        f.tools.clone(),
        f.sink.clone(),
        SessionConfig::new(ws.clone(), f.ws.clone()),
    )
    .with_storage(db.clone(), ws.clone());
    for q in ["q1", "q2", "q3"] {
        s.send(q).await.unwrap();
    }
    let stored = |db: Storage, ws: String| async move {
        db.load_turns(&ws, LoadMode::Resume)
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.turn.content.unwrap_or_default())
            .collect::<Vec<_>>()
    };
    assert!(matches!(
        s.rewind(4).await,
        Err(SessionError::Edit(EditError::TooFar {
            asked: 4,
            available: 3
        }))
    ));
    assert_eq!(s.rewind(2).await.unwrap(), "q2");
    assert_eq!(s.turns().len(), 2);
    assert_eq!(stored(db.clone(), ws.clone()).await, ["q1", "one"]);

    // Retry drops the last answer and asks again with the same message.
    f.llm.push(sse(openai::text(&["one again"])));
    s.retry().await.unwrap();
    assert_eq!(stored(db.clone(), ws.clone()).await, ["q1", "one again"]);
    let req = f.llm.requests().pop().unwrap();
    let msgs = req.body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 1, "only q1 goes to the model: {msgs:?}");
    assert_eq!(msgs[0]["content"], "q1");

    // Clear forgets the context but not the stored history.
    s.clear();
    assert!(s.turns().is_empty());
    assert!(matches!(
        s.retry().await,
        Err(SessionError::Edit(EditError::NothingToEdit("retry")))
    ));
    f.llm.push(sse(openai::text(&["fresh"])));
    s.send("q4").await.unwrap();
    let req = f.llm.requests().pop().unwrap();
    assert_eq!(req.body["messages"].as_array().unwrap().len(), 1);
    assert_eq!(
        stored(db.clone(), ws.clone()).await,
        ["q1", "one again", "q4", "fresh"]
    );
    assert!(matches!(
        s.set_model_alias("nope").await,
        Err(SessionError::Edit(EditError::FixedModel))
    ));
}
