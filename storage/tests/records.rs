//! Memories, users and tokens, plugin state, audit, usage and services on both backends.

mod common;

use common::*;
use std::time::Duration;
use turnstone_storage::prelude::*;

both_backends!(
    memories_crud_search_and_counters,
    memories_are_visible_only_to_their_scope,
    the_memories_api_sees_only_its_owners_rows,
    skills_keep_every_version,
    concurrent_saves_of_a_skill_each_get_a_version,
    users_and_tokens,
    plugin_state_crud,
    mcp_servers_crud_reset_a_namesakes_grant,
    audit_usage_and_services,
    attachments_store_consume_once_and_cascade
);

async fn attachments_store_consume_once_and_cascade(h: Harness) {
    let db = &h.db;
    let ws = published(db, None).await;
    let png = vec![0x89, b'P', b'N', b'G', 0, 1, 2, 255];
    let a = db
        .save_attachment(&NewAttachment {
            ws_id: ws.clone(),
            user_id: Some("u1".into()),
            filename: "dot.png".into(),
            mime_type: "image/png".into(),
            kind: "image".into(),
            content: png.clone(),
        })
        .await
        .unwrap();
    assert_eq!((a.size_bytes, a.consumed.as_deref()), (8, None));
    let (meta, bytes) = db
        .get_attachment(&ws, &a.attachment_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((meta.filename.as_str(), bytes), ("dot.png", png.clone()));
    // Another workstream cannot see it.
    let other = published(db, None).await;
    assert!(
        db.get_attachment(&other, &a.attachment_id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        !db.delete_attachment(&other, &a.attachment_id)
            .await
            .unwrap()
    );
    // Unknown workstream, oversized and NUL names are refused.
    let bad = |ws: &str, name: &str, size: usize| NewAttachment {
        ws_id: ws.into(),
        filename: name.into(),
        mime_type: "text/plain".into(),
        kind: "text".into(),
        content: vec![b'a'; size],
        ..Default::default()
    };
    assert!(db.save_attachment(&bad("nope", "a.txt", 1)).await.is_err());
    assert!(matches!(
        db.save_attachment(&bad(&ws, "a.txt", MAX_ATTACHMENT_BYTES + 1))
            .await,
        Err(StorageError::TooLarge { .. })
    ));
    assert!(db.save_attachment(&bad(&ws, "a\0.txt", 1)).await.is_err());
    let t = db.save_attachment(&bad(&ws, "notes.txt", 3)).await.unwrap();
    assert_eq!(db.list_attachments(&ws, true).await.unwrap().len(), 2);
    // Consumed exactly once; unknown ids are skipped.
    let ids = vec![a.attachment_id.clone(), "missing".to_string()];
    let got = db.consume_attachments(&ws, &ids).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, png);
    assert!(db.consume_attachments(&ws, &ids).await.unwrap().is_empty());
    let pending = db.list_attachments(&ws, true).await.unwrap();
    assert_eq!(
        pending
            .iter()
            .map(|p| p.attachment_id.clone())
            .collect::<Vec<_>>(),
        vec![t.attachment_id.clone()]
    );
    assert_eq!(db.list_attachments(&ws, false).await.unwrap().len(), 2);
    // A consumed one cannot be deleted; a pending one can.
    assert!(!db.delete_attachment(&ws, &a.attachment_id).await.unwrap());
    assert!(db.delete_attachment(&ws, &t.attachment_id).await.unwrap());
    // Deleting the workstream removes its attachments.
    assert!(db.delete_workstream(&ws).await.unwrap());
    assert!(
        db.get_attachment(&ws, &a.attachment_id)
            .await
            .unwrap()
            .is_none()
    );
}

async fn memories_crud_search_and_counters(h: Harness) {
    let db = &h.db;
    let m = db
        .save_memory(&NewMemory {
            name: "build_cmd".into(),
            description: "How to build".into(),
            content: "Run cargo xtask build; 100% of the time".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        (m.memory_type.as_str(), m.scope.as_str()),
        ("general", "global")
    );
    let updated = db
        .save_memory(&NewMemory {
            name: "build_cmd".into(),
            description: "How to build".into(),
            content: "Run cargo xtask build --release".into(),
            memory_type: Some("reference".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(updated.memory_id, m.memory_id, "upsert keeps identity");
    db.save_memory(&NewMemory {
        name: "tone".into(),
        content: "User prefers terse answers".into(),
        memory_type: Some("user".into()),
        scope: Some("user".into()),
        scope_id: "alice".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let got = db
        .get_memory("build_cmd", "global", "")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.content, "Run cargo xtask build --release");
    assert_eq!(got.access_count, 1);
    assert!(got.last_accessed.is_some());
    let hits = db.search_memories(None, "XTASK release", 10).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(
        db.get_memory("build_cmd", "global", "")
            .await
            .unwrap()
            .unwrap()
            .access_count,
        3
    );
    assert!(
        db.search_memories(None, "%", 10).await.unwrap().is_empty(),
        "LIKE wildcards are literal"
    );
    assert_eq!(
        db.list_memories(None, Some("user"), None, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        db.list_memories(None, None, Some("global"), 10)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(db.delete_memory("tone", "user", "alice").await.unwrap());
    assert!(!db.delete_memory("tone", "user", "alice").await.unwrap());
    for bad in [
        NewMemory {
            name: "x".into(),
            memory_type: Some("gossip".into()),
            ..Default::default()
        },
        NewMemory {
            name: "x".into(),
            scope: Some("workstream".into()),
            ..Default::default()
        },
        NewMemory {
            name: String::new(),
            ..Default::default()
        },
    ] {
        assert!(matches!(
            db.save_memory(&bad).await,
            Err(StorageError::InvalidInput(_))
        ));
    }
}

async fn memories_are_visible_only_to_their_scope(h: Harness) {
    let db = &h.db;
    let save = |name: &str, scope: &str, scope_id: &str, ty: Option<&str>| NewMemory {
        name: name.into(),
        description: format!("{name} hook"),
        content: format!("{name} lives in {scope}"),
        memory_type: ty.map(str::to_string),
        scope: Some(scope.into()),
        scope_id: scope_id.into(),
    };
    for m in [
        save("g", "global", "", None),
        save("alice_pref", "user", "alice", Some("user")),
        save("bob_pref", "user", "bob", Some("user")),
        save("ws1_note", "workstream", "ws1", Some("feedback")),
        save("ws2_note", "workstream", "ws2", None),
        save("proj_doc", "project", "p1", Some("project")),
    ] {
        db.save_memory(&m).await.unwrap();
    }
    let alice = MemoryView {
        user_id: Some("alice".into()),
        ws_id: Some("ws1".into()),
        project_id: Some("p1".into()),
    };
    let names = |v: Vec<Memory>| {
        let mut n: Vec<String> = v.into_iter().map(|m| m.name).collect();
        n.sort();
        n
    };
    assert_eq!(
        names(
            db.list_visible_memories(&alice, None, None, 100)
                .await
                .unwrap()
        ),
        ["alice_pref", "g", "proj_doc", "ws1_note"]
    );
    let bob = MemoryView {
        user_id: Some("bob".into()),
        ..Default::default()
    };
    assert_eq!(
        names(
            db.list_visible_memories(&bob, None, None, 100)
                .await
                .unwrap()
        ),
        ["bob_pref", "g"]
    );
    assert_eq!(
        names(
            db.search_visible_memories("lives pref", &bob, None, 100)
                .await
                .unwrap()
        ),
        ["bob_pref", "g"],
        "any word matches; only what bob may see"
    );
    assert_eq!(
        names(
            db.search_visible_memories("lives pref", &bob, Some("user"), 100)
                .await
                .unwrap()
        ),
        ["bob_pref"],
        "a scope narrows the search"
    );
    assert!(
        db.search_visible_memories("lives pref", &bob, Some("workstream"), 100)
            .await
            .unwrap()
            .is_empty(),
        "bob has no workstream in this view"
    );
    assert_eq!(
        names(
            db.list_visible_memories(&alice, Some("user"), None, 100)
                .await
                .unwrap()
        ),
        ["alice_pref"]
    );
    assert_eq!(
        names(
            db.list_visible_memories(&alice, None, Some("feedback"), 100)
                .await
                .unwrap()
        ),
        ["ws1_note"]
    );
    // `project` is the old name of `general`; an update without a type keeps it.
    let p = db
        .get_memory("proj_doc", "project", "p1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(p.memory_type, "general");
    let again = db
        .save_memory(&NewMemory {
            content: "changed".into(),
            ..save("ws1_note", "workstream", "ws1", None)
        })
        .await
        .unwrap();
    assert_eq!(
        (again.memory_type.as_str(), again.content.as_str()),
        ("feedback", "changed")
    );
    // Nobody sees anything scoped without the id.
    assert_eq!(
        names(
            db.list_visible_memories(&MemoryView::default(), None, None, 100)
                .await
                .unwrap()
        ),
        ["g"]
    );
}

async fn concurrent_saves_of_a_skill_each_get_a_version(h: Harness) {
    let saves = (0..4).map(|i| {
        let db = h.db.clone();
        tokio::spawn(async move {
            db.save_skill(&NewSkill {
                name: "race".into(),
                description: format!("Race {i}"),
                content: format!("---\nname: race\ndescription: Race {i}\n---\n"),
                created_by: None,
            })
            .await
        })
    });
    let mut versions: Vec<i64> = futures::future::join_all(saves)
        .await
        .into_iter()
        .map(|r| r.unwrap().expect("every save lands").version)
        .collect();
    versions.sort();
    assert_eq!(versions, [1, 2, 3, 4]);
}

async fn skills_keep_every_version(h: Harness) {
    let db = &h.db;
    let doc = |v: u32| format!("---\nname: deploy\ndescription: Deploy v{v}\n---\nbody {v}\n");
    for v in 1..=3 {
        let r = db
            .save_skill(&NewSkill {
                name: "deploy".into(),
                description: format!("Deploy v{v}"),
                content: doc(v),
                created_by: Some("u1".into()),
            })
            .await
            .unwrap();
        assert_eq!(r.version, i64::from(v));
    }
    db.save_skill(&NewSkill {
        name: "review".into(),
        description: "Review".into(),
        content: "---\nname: review\ndescription: Review\n---\n".into(),
        created_by: None,
    })
    .await
    .unwrap();
    let latest = db.latest_skills().await.unwrap();
    assert_eq!(
        latest
            .iter()
            .map(|r| (r.name.as_str(), r.version))
            .collect::<Vec<_>>(),
        [("deploy", 3), ("review", 1)]
    );
    let versions = db.skill_versions("deploy").await.unwrap();
    assert_eq!(
        versions.iter().map(|r| r.version).collect::<Vec<_>>(),
        [3, 2, 1]
    );
    assert_eq!(versions[2].content, doc(1));
    assert_eq!(versions[0].created_by.as_deref(), Some("u1"));
    let v2 = db.get_skill("deploy", Some(2)).await.unwrap().unwrap();
    assert_eq!(v2.description, "Deploy v2");
    assert_eq!(
        db.get_skill("deploy", None).await.unwrap().unwrap().version,
        3
    );
    assert!(db.get_skill("deploy", Some(9)).await.unwrap().is_none());
    for bad in ["", "a b", "x/y"] {
        assert!(matches!(
            db.save_skill(&NewSkill {
                name: bad.into(),
                ..Default::default()
            })
            .await,
            Err(StorageError::InvalidInput(_))
        ));
    }
    assert_eq!(db.delete_skill("deploy").await.unwrap(), 3);
    assert_eq!(db.delete_skill("deploy").await.unwrap(), 0);
    assert_eq!(db.latest_skills().await.unwrap().len(), 1);
}

async fn users_and_tokens(h: Harness) {
    let db = &h.db;
    assert_eq!(db.count_users().await.unwrap(), 0);
    let alice = db
        .create_user("alice", "Alice", "$argon2id$v=19$fake", "admin")
        .await
        .unwrap();
    assert!(matches!(
        db.create_user("alice", "Other", "h", "viewer").await,
        Err(StorageError::DuplicateUsername(ref u)) if u == "alice"
    ));
    assert!(matches!(
        db.create_user("bad name", "B", "h", "viewer").await,
        Err(StorageError::InvalidInput(_))
    ));
    assert_eq!(
        db.get_user_by_name("alice").await.unwrap().unwrap().user_id,
        alice.user_id
    );

    let (raw, tok) = db
        .create_api_token(&alice.user_id, "ci", &["read".into(), "write".into()], None)
        .await
        .unwrap();
    assert!(
        raw.starts_with("ts_")
            && raw.len() == 67
            && raw[3..].chars().all(|c| c.is_ascii_hexdigit())
    );
    assert_eq!(tok.token_prefix, &raw[..8]);
    assert_eq!(tok.scopes, ["read", "write"]);
    let stored = h
        .raw
        .scalar_string(&format!(
            "SELECT token_hash FROM api_tokens WHERE token_id = '{}'",
            tok.token_id
        ))
        .await
        .unwrap();
    assert_eq!(stored.len(), 64);
    assert_ne!(stored, raw, "only the hash is stored");
    let (vt, vu) = db
        .verify_api_token(&raw)
        .await
        .unwrap()
        .expect("valid token");
    assert_eq!(
        (vt.token_id.as_str(), vu.username.as_str()),
        (tok.token_id.as_str(), "alice")
    );
    assert!(
        db.list_api_tokens(None).await.unwrap()[0]
            .last_used
            .is_some()
    );
    let mut forged = raw.clone();
    forged.replace_range(66..67, if raw.ends_with('0') { "1" } else { "0" });
    assert!(db.verify_api_token(&forged).await.unwrap().is_none());
    assert!(db.verify_api_token("garbage").await.unwrap().is_none());

    let (expired_raw, _) = db
        .create_api_token(
            &alice.user_id,
            "old",
            &["read".into()],
            Some("2020-01-01T00:00:00.000Z"),
        )
        .await
        .unwrap();
    assert!(
        db.verify_api_token(&expired_raw).await.unwrap().is_none(),
        "expired tokens fail"
    );
    assert!(matches!(
        db.create_api_token("nobody", "x", &["read".into()], None)
            .await,
        Err(StorageError::UnknownUser(_))
    ));
    assert!(
        db.create_api_token(&alice.user_id, "x", &["a,b".into()], None)
            .await
            .is_err()
    );
    assert!(
        db.create_api_token(&alice.user_id, "x", &["read".into()], Some("tomorrow"))
            .await
            .is_err()
    );
    assert!(db.revoke_api_token(&tok.token_id).await.unwrap());
    assert!(db.verify_api_token(&raw).await.unwrap().is_none());

    db.link_channel_user("slack", "U123", &alice.user_id)
        .await
        .unwrap();
    assert_eq!(
        db.channel_user("slack", "U123").await.unwrap(),
        Some(alice.user_id.clone())
    );
    assert!(matches!(
        db.link_channel_user("slack", "U9", "nobody").await,
        Err(StorageError::UnknownUser(_))
    ));

    assert!(db.delete_user(&alice.user_id).await.unwrap());
    assert!(
        db.list_api_tokens(Some(&alice.user_id))
            .await
            .unwrap()
            .is_empty(),
        "tokens go with the user"
    );
    assert!(db.channel_user("slack", "U123").await.unwrap().is_none());
}

async fn plugin_state_crud(h: Harness) {
    let db = &h.db;
    let rec = PluginRecord {
        name: "word_count".into(),
        version: "0.1.0".into(),
        kind: "tool".into(),
        enabled: true,
        granted: None,
        config: "{}".into(),
        state: "loaded".into(),
        last_error: None,
        updated: String::new(),
        reload_seq: 0,
    };
    db.upsert_plugin(&rec).await.unwrap();
    assert!(db.request_plugin_reload("word_count").await.unwrap());
    assert!(db.request_plugin_reload("word_count").await.unwrap());
    assert!(!db.request_plugin_reload("nope").await.unwrap());
    assert_eq!(
        db.get_plugin("word_count")
            .await
            .unwrap()
            .unwrap()
            .reload_seq,
        2
    );
    assert!(db.set_plugin_enabled("word_count", false).await.unwrap());
    assert!(
        db.set_plugin_grants("word_count", Some(r#"{"http":["api.example.com"]}"#))
            .await
            .unwrap()
    );
    assert!(
        db.set_plugin_state("word_count", "update_failed", Some("bad magic"))
            .await
            .unwrap()
    );
    let got = db.get_plugin("word_count").await.unwrap().unwrap();
    assert!(!got.enabled);
    assert_eq!(
        got.granted.as_deref(),
        Some(r#"{"http":["api.example.com"]}"#)
    );
    assert_eq!(
        (got.state.as_str(), got.last_error.as_deref()),
        ("update_failed", Some("bad magic"))
    );
    assert!(!got.updated.is_empty());
    assert!(matches!(
        db.set_plugin_grants("word_count", Some("{oops")).await,
        Err(StorageError::InvalidInput(_))
    ));
    assert!(!db.set_plugin_enabled("ghost", true).await.unwrap());
    assert_eq!(db.list_plugins().await.unwrap().len(), 1);
    assert!(db.delete_plugin("word_count").await.unwrap());
    assert!(db.get_plugin("word_count").await.unwrap().is_none());
}

async fn mcp_servers_crud_reset_a_namesakes_grant(h: Harness) {
    let db = &h.db;
    let rec = McpServerRecord {
        name: "github".into(),
        definition: r#"{"command":"node","args":["srv.js"]}"#.into(),
        created_by: Some("u1".into()),
        created: String::new(),
        updated: String::new(),
    };
    db.create_mcp_server(&rec, true).await.unwrap();
    let row = db.get_plugin("github").await.unwrap().unwrap();
    assert_eq!(
        (row.kind.as_str(), row.enabled, row.granted.as_deref()),
        ("mcp", true, None)
    );
    assert!(matches!(
        db.create_mcp_server(&rec, false).await,
        Err(StorageError::McpServerExists(n)) if n == "github"
    ));
    // Grant it, bump its reload sequence, then delete and recreate: the new
    // server starts with nothing granted and a fresh row.
    db.set_plugin_grants("github", Some(r#"{"exec":["node"]}"#))
        .await
        .unwrap();
    db.request_plugin_reload("github").await.unwrap();
    assert!(
        db.update_mcp_server("github", r#"{"command":"python3"}"#)
            .await
            .unwrap()
    );
    let got = db.get_mcp_server("github").await.unwrap().unwrap();
    assert_eq!(got.definition, r#"{"command":"python3"}"#);
    assert_eq!(got.created_by.as_deref(), Some("u1"));
    assert!(!got.created.is_empty() && got.updated >= got.created);
    assert!(matches!(
        db.update_mcp_server("github", "[1]").await,
        Err(StorageError::InvalidInput(_))
    ));
    assert!(!db.update_mcp_server("ghost", "{}").await.unwrap());
    assert!(db.delete_mcp_server("github").await.unwrap());
    assert!(db.get_plugin("github").await.unwrap().is_none());
    assert!(!db.delete_mcp_server("github").await.unwrap());
    // A stale row of the name (say, written by an older node) lends nothing.
    let stale = PluginRecord {
        name: "github".into(),
        version: "1".into(),
        kind: "mcp".into(),
        enabled: true,
        granted: Some(r#"{"exec":["node"]}"#.into()),
        config: "{}".into(),
        state: "connected".into(),
        last_error: None,
        updated: String::new(),
        reload_seq: 0,
    };
    db.upsert_plugin(&stale).await.unwrap();
    db.request_plugin_reload("github").await.unwrap();
    db.create_mcp_server(&rec, false).await.unwrap();
    let row = db.get_plugin("github").await.unwrap().unwrap();
    assert_eq!((row.enabled, row.granted, row.reload_seq), (false, None, 0));
    // A component row of another name is untouched by MCP deletes.
    let component = PluginRecord {
        name: "word_count".into(),
        kind: "tool".into(),
        ..stale
    };
    db.upsert_plugin(&component).await.unwrap();
    assert!(db.delete_mcp_server("github").await.unwrap());
    assert!(db.get_plugin("word_count").await.unwrap().is_some());
    assert!(db.list_mcp_servers().await.unwrap().is_empty());
    assert!(matches!(
        db.create_mcp_server(
            &McpServerRecord {
                definition: "not json".into(),
                ..rec.clone()
            },
            true
        )
        .await,
        Err(StorageError::InvalidInput(_))
    ));
}

async fn audit_usage_and_services(h: Harness) {
    let db = &h.db;
    let a = db
        .append_audit(&AuditEntry {
            id: 0,
            timestamp: String::new(),
            user_id: Some("u1".into()),
            action: "plugin.disable".into(),
            target: Some("word_count".into()),
            detail: Some("{}".into()),
            ip: Some("127.0.0.1".into()),
        })
        .await
        .unwrap();
    let b = db
        .append_audit(&AuditEntry {
            id: 0,
            timestamp: String::new(),
            user_id: None,
            action: "plugin.enable".into(),
            target: None,
            detail: None,
            ip: None,
        })
        .await
        .unwrap();
    let log = db.list_audit(10).await.unwrap();
    assert_eq!(log.iter().map(|e| e.id).collect::<Vec<_>>(), [b, a]);
    assert_eq!(log[1].action, "plugin.disable");
    db.record_usage(&UsageEvent {
        prompt_tokens: 10,
        completion_tokens: 5,
        ..Default::default()
    })
    .await
    .unwrap();
    let svc = ServiceRecord {
        service_id: "node-1".into(),
        kind: "server".into(),
        node_id: "n1".into(),
        url: Some("http://127.0.0.1:8080".into()),
        version: Some("0.1.0".into()),
        started: String::new(),
        last_heartbeat: String::new(),
    };
    db.heartbeat(&svc).await.unwrap();
    db.heartbeat(&svc).await.unwrap();
    assert_eq!(
        db.live_services(Duration::from_secs(60))
            .await
            .unwrap()
            .len(),
        1
    );
    h.raw
        .exec("UPDATE services SET last_heartbeat = '2020-01-01T00:00:00.000Z'")
        .await;
    assert!(
        db.live_services(Duration::from_secs(60))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn the_memories_api_sees_only_its_owners_rows(h: Harness) {
    let db = &h.db;
    let ws_of = |user: &str| NewWorkstream {
        user_id: Some(user.into()),
        name: "w".into(),
        ..Default::default()
    };
    let a = db.create_workstream(&ws_of("alice")).await.unwrap();
    db.publish_workstream(&a).await.unwrap();
    let b = db.create_workstream(&ws_of("bob")).await.unwrap();
    db.publish_workstream(&b).await.unwrap();
    let save = |name: &str, scope: &str, scope_id: &str| NewMemory {
        name: name.into(),
        description: "shared words".into(),
        content: "shared words".into(),
        memory_type: None,
        scope: Some(scope.into()),
        scope_id: scope_id.into(),
    };
    // Bob's rows are the newest: a limit applied before filtering would
    // leave Alice with nothing.
    for m in [
        save("g", "global", ""),
        save("alice_pref", "user", "alice"),
        save("alice_ws", "workstream", &a.ws_id),
        save("proj", "project", "p1"),
    ] {
        db.save_memory(&m).await.unwrap();
    }
    for i in 0..5 {
        db.save_memory(&save(&format!("bob_{i}"), "user", "bob"))
            .await
            .unwrap();
        db.save_memory(&save(&format!("bob_ws_{i}"), "workstream", &b.ws_id))
            .await
            .unwrap();
    }
    let names = |v: Vec<Memory>| {
        let mut n: Vec<String> = v.into_iter().map(|m| m.name).collect();
        n.sort();
        n
    };
    assert_eq!(
        names(
            db.list_memories(Some("alice"), None, None, 3)
                .await
                .unwrap()
        ),
        ["alice_pref", "alice_ws", "g"]
    );
    assert_eq!(
        names(
            db.search_memories(Some("alice"), "shared", 3)
                .await
                .unwrap()
        ),
        ["alice_pref", "alice_ws", "g"]
    );
    // Searching reads only what was found: Bob's rows were not touched.
    // (Listing does not count as reading; get would.)
    let all = db.list_memories(None, None, None, 100).await.unwrap();
    let count = |name: &str| all.iter().find(|m| m.name == name).unwrap().access_count;
    assert_eq!(count("bob_0"), 0);
    assert_eq!(count("alice_pref"), 1);
    // A service caller (no owner) sees everything, projects included.
    assert_eq!(
        db.list_memories(None, None, None, 100).await.unwrap().len(),
        14
    );
}
