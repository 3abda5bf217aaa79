//! The agent tools in session turns, on a real SQLite database: `memory`
//! saves and lists only what its caller may see, `recall` finds only the
//! caller's conversations, the memory index leads the next session's
//! requests, and `skills` loads a skill whose instructions and
//! `allowed_tools` shape the next requests.

use serde_json::Value;
use std::sync::Arc;
use turnstone_engine::session::{AgentContext, ChatSession};
use turnstone_engine::skills::SkillLibrary;
use turnstone_scripted_llm::openai;
use turnstone_storage::prelude::*;
use turnstone_test_support::engine::{TestSession, session};
use turnstone_test_support::memories;
use turnstone_test_support::sse;

async fn database(dir: &std::path::Path) -> Storage {
    turnstone_storage::open(&DbConfig {
        backend: BackendKind::Sqlite,
        path: Some(dir.join("t.db")),
        ..Default::default()
    })
    .await
    .unwrap()
}

async fn workstream(db: &Storage, user: &str, name: &str) -> String {
    let r = db
        .create_workstream(&NewWorkstream {
            user_id: Some(user.into()),
            name: name.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    db.publish_workstream(&r).await.unwrap();
    r.ws_id
}

/// A session of `user` on workstream `ws`, with the agent interfaces.
fn agent_session(
    f: &TestSession,
    db: &Storage,
    ws: &str,
    user: &str,
    skills: Option<Arc<SkillLibrary>>,
) -> ChatSession {
    let cfg = turnstone_engine::session::SessionConfig {
        acting_user_id: Some(user.into()),
        ..f.config(ws)
    };
    f.another(f.binding.clone(), cfg)
        .with_storage(db.clone(), ws)
        .with_agent(AgentContext {
            skills,
            model_alias: Some("default".into()),
            local: false,
            ..Default::default()
        })
}

/// The output of the tool result answering `call_id` in request `n`.
fn tool_output(f: &TestSession, n: usize, call_id: &str) -> String {
    let reqs = f.llm.requests();
    reqs[n].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("no result for {call_id} in request {n}"))["content"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The header of every item the session asked approval for, in order.
fn prompt_headers(f: &TestSession) -> Vec<String> {
    f.recorder
        .prompts()
        .iter()
        .flat_map(|p| p.items.iter().map(|i| i.header.clone()))
        .collect()
}

fn system_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn memories_and_history_stay_with_their_user() {
    let f = session(
        vec![
            // Alice saves a user memory and a workstream memory, then talks.
            sse(openai::tool_call(
                "c1",
                "memory",
                &[r#"{"action": "save", "name": "Tone", "content": "Alice likes terse answers", "description": "answer style", "type": "user", "scope": "user"}"#],
            )),
            sse(openai::tool_call(
                "c2",
                "memory",
                &[r#"{"action": "save", "name": "ws_note", "content": "this workstream is about invoices", "scope": "workstream"}"#],
            )),
            sse(openai::tool_call(
                "c3",
                "memory",
                &[r#"{"action": "save", "name": "house_rule", "content": "run the tests before committing", "description": "how we commit", "type": "feedback", "scope": "global"}"#],
            )),
            sse(openai::text(&["Saved."])),
            // Bob lists, searches and recalls: only his and the global one.
            sse(openai::tool_call("b1", "memory", &[r#"{"action": "list"}"#])),
            sse(openai::tool_call(
                "b2",
                "memory",
                &[r#"{"action": "get", "name": "tone", "scope": "user"}"#],
            )),
            sse(openai::tool_call("b3", "recall", &[r#"{"query": "invoices"}"#])),
            sse(openai::text(&["Done."])),
            // Alice in a new workstream: the index leads; her memory lists.
            sse(openai::tool_call(
                "a1",
                "memory",
                &[r#"{"action": "search", "query": "answer style terse"}"#],
            )),
            sse(openai::tool_call("a2", "recall", &[r#"{"query": "invoices"}"#])),
            sse(openai::text(&["Hi."])),
        ],
        true,
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;

    let alice_ws = workstream(&db, "alice", "billing").await;
    let mut alice = agent_session(&f, &db, &alice_ws, "alice", None);
    // The global memory is shared with everyone: saving it asks.
    f.recorder.approve(true);
    alice.send("remember things about invoices").await.unwrap();
    let asked = prompt_headers(&f);
    assert_eq!(
        asked,
        ["memory save (global, shared with every user): house_rule"],
        "only the shared save asked"
    );
    assert!(
        tool_output(&f, 1, "c1").contains("Saved memory `tone` (user, user)"),
        "{}",
        tool_output(&f, 1, "c1")
    );
    assert!(tool_output(&f, 3, "c3").contains("(feedback, global)"));

    let bob_ws = workstream(&db, "bob", "other").await;
    let mut bob = agent_session(&f, &db, &bob_ws, "bob", None);
    bob.send("what do you know?").await.unwrap();
    let listed = tool_output(&f, 5, "b1");
    assert!(listed.contains("house_rule"), "{listed}");
    assert!(
        !listed.contains("tone") && !listed.contains("ws_note"),
        "{listed}"
    );
    let got = tool_output(&f, 6, "b2");
    assert!(got.contains("no memory named `tone`"), "{got}");
    let recalled = tool_output(&f, 7, "b3");
    assert!(
        recalled.contains("Nothing in past conversations matches"),
        "bob never saw alice's invoices: {recalled}"
    );
    // Bob's first request carried only what he may see in its index.
    let bob_system = system_text(&f.llm.requests()[4].body);
    assert!(bob_system.contains("house_rule"), "{bob_system}");
    assert!(!bob_system.contains("tone"), "{bob_system}");

    let alice_ws2 = workstream(&db, "alice", "new").await;
    let mut alice2 = agent_session(&f, &db, &alice_ws2, "alice", None);
    alice2.send("how should you answer me?").await.unwrap();
    let first = &f.llm.requests()[8].body;
    let index = system_text(first);
    assert!(index.contains("## Memories"), "{index}");
    assert!(
        index.contains("- tone (user, user): answer style"),
        "{index}"
    );
    assert!(!index.contains("ws_note"), "another workstream's: {index}");
    let found = tool_output(&f, 9, "a1");
    assert!(found.contains("tone") && found.contains("terse"), "{found}");
    let recalled = tool_output(&f, 10, "a2");
    assert!(
        recalled.contains("billing"),
        "her own workstream: {recalled}"
    );
    assert!(recalled.contains("invoices"), "{recalled}");
}

#[tokio::test]
async fn a_loaded_skill_shapes_the_next_requests() {
    let skills_dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(skills_dir.path().join("review")).unwrap();
    std::fs::write(
        skills_dir.path().join("review/SKILL.md"),
        "---\nname: review\ndescription: Review a change carefully\nrisk_level: medium\nallowed_tools: [read_file, skills]\narguments:\n  - name: focus\n    required: true\n---\nReview with attention to {{focus}} using {{model}}.\n",
    )
    .unwrap();
    // A broken document is left out; the others load.
    std::fs::write(
        skills_dir.path().join("broken.md"),
        "---\nname: [oops\n---\n",
    )
    .unwrap();
    let f = session(
        vec![
            sse(openai::tool_call("s0", "skills", &[r#"{"action": "search", "query": "review a change"}"#])),
            sse(openai::tool_call(
                "s1",
                "skills",
                &[r#"{"action": "load", "name": "review"}"#],
            )),
            sse(openai::tool_call(
                "s2",
                "skills",
                &[r#"{"action": "load", "name": "review", "arguments": {"focus": "error handling"}}"#],
            )),
            sse(openai::tool_call("s3", "bash", &[r#"{"command": "ls"}"#])),
            sse(openai::text(&["Reviewing."])),
        ],
        false,
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    let ws = workstream(&db, "alice", "review").await;
    let lib = SkillLibrary::new(vec![skills_dir.path().to_path_buf()], Some(db.clone()));
    assert_eq!(lib.catalog().await.problems().len(), 1);
    let mut s = agent_session(&f, &db, &ws, "alice", Some(lib.clone()));
    // Both loads ask (the first fails on its missing argument when it runs).
    f.recorder.approve(true);
    f.recorder.approve(true);
    s.send("review my change").await.unwrap();

    let searched = tool_output(&f, 1, "s0");
    assert!(searched.contains("review (v1, risk medium)"), "{searched}");
    let missing = tool_output(&f, 2, "s1");
    assert!(missing.contains("needs the argument `focus`"), "{missing}");
    let loaded = tool_output(&f, 3, "s2");
    assert!(loaded.contains("Loaded skill review"), "{loaded}");
    // The next request: the skill's instructions, and only its tools.
    let next = &f.llm.requests()[3].body;
    let system = system_text(next);
    assert!(
        system.contains("Review with attention to error handling using default."),
        "{system}"
    );
    let mut tools = tool_names(next);
    tools.sort();
    assert_eq!(tools, ["read_file", "skills"]);
    // A call outside them is refused before it runs.
    let refused = tool_output(&f, 4, "s3");
    assert!(
        refused.contains("not available while skill review is active"),
        "{refused}"
    );
    // Loading asked for approval; the search did not.
    let asked = prompt_headers(&f);
    assert_eq!(
        asked,
        ["skills load: review", "skills load: review"],
        "{asked:?}"
    );
    // The activation is kept with the workstream: a resumed session has it.
    let resumed = agent_session(&f, &db, &ws, "alice", Some(lib))
        .resume()
        .await
        .unwrap();
    let active = resumed.active_skill().expect("the skill came back");
    assert_eq!(active.info.name, "review");
    assert!(active.body.contains("error handling"));
}

#[tokio::test]
async fn tool_saved_skills_cannot_replace_files_or_others_and_never_auto_approve() {
    let skills_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        skills_dir.path().join("review.md"),
        "---\nname: review\ndescription: Review carefully\n---\nReview.\n",
    )
    .unwrap();
    let create = |id: &str, name: &str| {
        sse(openai::tool_call(
            id,
            "skills",
            &[&serde_json::json!({
                "action": "create",
                "document": format!("---\nname: {name}\ndescription: mine\n---\nDo it.\n"),
            })
            .to_string()],
        ))
    };
    let f = session(
        vec![
            create("s1", "review"),
            create("s2", "mine"),
            sse(openai::tool_call(
                "s3",
                "skills",
                &[r#"{"action": "load", "name": "fast"}"#],
            )),
            sse(openai::tool_call(
                "s4",
                "write_file",
                &[r#"{"path": "x.txt", "content": "y"}"#],
            )),
            sse(openai::text(&["done"])),
            create("b1", "mine"),
            sse(openai::text(&["done"])),
        ],
        false,
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    let lib = SkillLibrary::new(vec![skills_dir.path().to_path_buf()], Some(db.clone()));
    // An administrator's database skill that asks to skip approvals.
    turnstone_engine::session::save_skill(
        &lib,
        &db,
        "---\nname: fast\ndescription: Go fast\nauto_approve: true\n---\nGo.\n",
        Some("admin".into()),
    )
    .await
    .unwrap();

    let ws = workstream(&db, "alice", "a").await;
    let mut alice = agent_session(&f, &db, &ws, "alice", Some(lib.clone()));
    for _ in 0..4 {
        f.recorder.approve(true);
    }
    alice.send("make skills").await.unwrap();
    let refused = tool_output(&f, 1, "s1");
    assert!(refused.contains("operator's skill files"), "{refused}");
    assert!(tool_output(&f, 2, "s2").contains("mine"), "saved");
    assert!(tool_output(&f, 3, "s3").contains("Loaded skill fast"));
    // The database skill's auto_approve is not honoured: write_file asked.
    let asked = prompt_headers(&f);
    assert!(asked.iter().any(|h| h.contains("write_file")), "{asked:?}");
    assert_eq!(std::fs::read_to_string(f.ws.join("x.txt")).unwrap(), "y");

    // Bob cannot publish a new version of Alice's skill.
    let ws_b = workstream(&db, "bob", "b").await;
    let mut bob = agent_session(&f, &db, &ws_b, "bob", Some(lib));
    f.recorder.approve(true);
    bob.send("overwrite it").await.unwrap();
    let other = tool_output(&f, 6, "b1");
    assert!(other.contains("saved by someone else"), "{other}");
    assert_eq!(db.skill_versions("mine").await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_resumed_workstream_gets_the_current_skill_version_and_is_told() {
    let f = session(Vec::new(), false).await;
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    let lib = SkillLibrary::new(Vec::new(), Some(db.clone()));
    let doc = |body: &str| format!("---\nname: tidy\ndescription: Tidy up\n---\n{body}\n");
    turnstone_engine::session::save_skill(&lib, &db, &doc("Tidy v1."), Some("admin".into()))
        .await
        .unwrap();
    let ws = workstream(&db, "alice", "t").await;
    let mut s = agent_session(&f, &db, &ws, "alice", Some(lib.clone()));
    s.activate_skill("tidy", &Default::default()).await.unwrap();
    // Same version: resumed silently.
    let before = f.recorder.events().len();
    let same = agent_session(&f, &db, &ws, "alice", Some(lib.clone()))
        .resume()
        .await
        .unwrap();
    assert_eq!(same.active_skill().unwrap().info.version, 1);
    let said = |from: usize| -> Vec<String> {
        f.recorder.events()[from..]
            .iter()
            .filter_map(|e| match e {
                turnstone_protocol::Event::Info(i) => Some(i.message.clone()),
                _ => None,
            })
            .collect()
    };
    assert!(said(before).is_empty(), "{:?}", said(before));
    // The operator fixes the skill; the workstream resumes on version 2.
    turnstone_engine::session::save_skill(&lib, &db, &doc("Tidy v2."), Some("admin".into()))
        .await
        .unwrap();
    lib.invalidate().await;
    let before = f.recorder.events().len();
    let resumed = agent_session(&f, &db, &ws, "alice", Some(lib))
        .resume()
        .await
        .unwrap();
    let active = resumed.active_skill().unwrap();
    assert_eq!(active.info.version, 2);
    assert!(active.body.contains("Tidy v2."));
    assert_eq!(
        said(before),
        ["skill \"tidy\" is now version 2 (this workstream used version 1)"]
    );
}

/// The memory index lists the memories of the workstream's project: looked
/// up from the workstream's row, or as the caller that loaded the row said
/// (`with_project`), which the session then uses without reading the row
/// again.
#[tokio::test]
async fn the_memory_index_lists_the_projects_memories() {
    let f = session(
        vec![
            sse(openai::text(&["One."])),
            sse(openai::text(&["Two."])),
            sse(openai::text(&["Three."])),
        ],
        true,
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    let ws = memories::project_workstream(&db, Some("alice".into())).await;
    let index_of = |n: usize| system_text(&f.llm.requests()[n].body);

    let mut looked_up = agent_session(&f, &db, &ws, "alice", None);
    looked_up.send("hi").await.unwrap();
    let index = index_of(0);
    assert!(index.contains(memories::PROJECT_MEMORY_LINE), "{index}");
    assert!(!index.contains(memories::OTHER_PROJECT_MEMORY), "{index}");

    // Told the project, the session does not read the row: told another
    // project than the row's, it lists that one's memories.
    let mut told = agent_session(&f, &db, &ws, "alice", None)
        .with_project(Some(memories::OTHER_PROJECT.into()));
    told.send("hi").await.unwrap();
    let index = index_of(1);
    assert!(index.contains(memories::OTHER_PROJECT_MEMORY), "{index}");
    assert!(!index.contains(memories::PROJECT_MEMORY_LINE), "{index}");

    // Told it has none: no project's memories.
    let mut none = agent_session(&f, &db, &ws, "alice", None).with_project(None);
    none.send("hi").await.unwrap();
    let index = index_of(2);
    assert!(
        !index.contains(memories::PROJECT_MEMORY)
            && !index.contains(memories::OTHER_PROJECT_MEMORY),
        "{index}"
    );
}
