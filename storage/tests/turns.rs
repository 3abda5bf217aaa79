//! Turns, compaction checkpoints, search and bad input on both backends.

mod common;

use common::*;
use turnstone_storage::prelude::*;

both_backends!(
    turns_round_trip_byte_exact,
    resume_uses_the_latest_valid_checkpoint,
    corrupt_checkpoint_falls_back_to_the_full_transcript,
    full_text_search_returns_message_role_ws_and_time,
    hostile_search_input_is_plain_words,
    bad_input_gets_typed_errors,
    truncate_drops_later_turns_and_a_checkpoint_that_covers_them,
    a_returned_write_is_visible_on_every_connection,
);

async fn truncate_drops_later_turns_and_a_checkpoint_that_covers_them(h: Harness) {
    let db = &h.db;
    let ws = published(db, None).await;
    let other = published(db, None).await;
    let ids = db
        .save_turns(
            &ws,
            &(1..=6).map(|i| user(&format!("t{i}"))).collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    db.save_turn(&other, &user("elsewhere")).await.unwrap();
    let texts = |v: Vec<StoredTurn>| {
        v.into_iter()
            .map(|t| t.turn.content.unwrap())
            .collect::<Vec<_>>()
    };
    // A checkpoint entirely before the cut survives.
    db.save_compaction(&ws, ids[1], &[user("sum")])
        .await
        .unwrap();
    assert_eq!(
        db.truncate_turns(&ws, ids[4]).await.unwrap(),
        2,
        "t6 and the summary row"
    );
    // The summary row was after the cut: the checkpoint went with it.
    assert_eq!(db.checkpoint(&ws).await.unwrap(), None);
    assert_eq!(
        texts(db.load_turns(&ws, LoadMode::Resume).await.unwrap()),
        ["t1", "t2", "t3", "t4", "t5"]
    );
    let cp = db
        .save_compaction(&ws, ids[1], &[user("sum2")])
        .await
        .unwrap();
    let last = *cp.summary_ids.last().unwrap();
    db.save_turn(&ws, &user("t7")).await.unwrap();
    assert_eq!(db.truncate_turns(&ws, last).await.unwrap(), 1);
    assert_eq!(
        db.checkpoint(&ws).await.unwrap(),
        Some(cp),
        "kept: wholly before the cut"
    );
    assert_eq!(
        texts(db.load_turns(&ws, LoadMode::Resume).await.unwrap()),
        ["sum2", "t3", "t4", "t5"]
    );
    // Other workstreams are untouched; truncating past the end is a no-op.
    assert_eq!(db.truncate_turns(&ws, i64::MAX).await.unwrap(), 0);
    assert_eq!(db.count_turns(&other).await.unwrap(), 1);
    assert_eq!(db.truncate_turns(&ws, 0).await.unwrap(), 6);
    assert_eq!(db.count_turns(&ws).await.unwrap(), 0);
}

async fn turns_round_trip_byte_exact(h: Harness) {
    let db = &h.db;
    let ws = published(db, None).await;
    // Arguments exactly as the model produced them, odd spacing and all.
    let calls = r#"[{"id":"call_1","name":"bash","arguments":"{\"command\": \"ls  -la\" }"}]"#;
    let assistant = NewTurn {
        role: Role::Assistant,
        content: Some("Let me look. ✓ ünïcode".into()),
        tool_calls: Some(calls.into()),
        provider_data: Some(r#"{"blocks":[{"type":"thinking","signature":"abc"}]}"#.into()),
        event_id: Some(41),
        ..NewTurn::text(Role::Assistant, "")
    };
    let tool = NewTurn {
        role: Role::Tool,
        content: Some("total 0".into()),
        tool_name: Some("bash".into()),
        tool_call_id: Some("call_1".into()),
        is_error: true,
        meta: Some(r#"{"effect":"committed"}"#.into()),
        attachments: Some(r#"[{"sha256":"00"}]"#.into()),
        ..NewTurn::text(Role::Tool, "")
    };
    let a = db.save_turn(&ws, &user("hi")).await.unwrap();
    let b = db.save_turn(&ws, &assistant).await.unwrap();
    let c = db.save_turn(&ws, &tool).await.unwrap();
    assert!(a < b && b < c);
    let turns = db.load_turns(&ws, LoadMode::Resume).await.unwrap();
    assert_eq!(turns.len(), 3);
    assert_eq!(turns[1].turn.tool_calls.as_deref(), Some(calls));
    assert_eq!(turns[1].turn.content, assistant.content);
    assert_eq!(turns[1].turn.provider_data, assistant.provider_data);
    assert_eq!(turns[1].turn.event_id, Some(41));
    assert_eq!(turns[2].turn.role, Role::Tool);
    assert!(turns[2].turn.is_error && !turns[1].turn.is_error);
    assert_eq!(turns[2].turn.tool_call_id.as_deref(), Some("call_1"));
    assert_eq!(turns[2].turn.meta, tool.meta);
    assert_eq!(turns[2].turn.attachments, tool.attachments);
    assert!(turns[0].timestamp.ends_with('Z') && turns[0].timestamp.len() == 24);
    assert_eq!(db.count_turns(&ws).await.unwrap(), 3);
    let batch = db.save_turns(&ws, &[user("x"), user("y")]).await.unwrap();
    assert_eq!(batch.len(), 2);
    assert!(batch[0] > c && batch[1] > batch[0]);
}

async fn resume_uses_the_latest_valid_checkpoint(h: Harness) {
    let db = &h.db;
    let ws = published(db, None).await;
    let ids = db
        .save_turns(
            &ws,
            &(1..=10).map(|i| user(&format!("t{i}"))).collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    let first = db
        .save_compaction(&ws, ids[5], &[user("sum1")])
        .await
        .unwrap();
    assert_eq!(first.watermark, ids[5]);
    db.save_turn(&ws, &user("t11")).await.unwrap();
    let second = db
        .save_compaction(
            &ws,
            ids[7],
            &[user("[summary]"), NewTurn::text(Role::Assistant, "sum2")],
        )
        .await
        .unwrap();
    db.save_turn(&ws, &user("t12")).await.unwrap();
    let texts = |v: Vec<StoredTurn>| {
        v.into_iter()
            .map(|t| t.turn.content.unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        texts(db.load_turns(&ws, LoadMode::Resume).await.unwrap()),
        ["[summary]", "sum2", "t9", "t10", "t11", "t12"]
    );
    assert_eq!(db.checkpoint(&ws).await.unwrap(), Some(second));
    let transcript = texts(db.load_turns(&ws, LoadMode::Transcript).await.unwrap());
    assert_eq!(transcript.len(), 12, "source turns are kept");
    assert!(!transcript.contains(&"sum1".to_string()));
    assert_eq!(
        db.load_turns(&ws, LoadMode::Everything)
            .await
            .unwrap()
            .len(),
        15
    );
    assert!(matches!(
        db.save_compaction(&ws, 999_999_999, &[user("s")]).await,
        Err(StorageError::InvalidInput(_))
    ));
    assert!(db.save_compaction(&ws, 0, &[]).await.is_err());
}

async fn corrupt_checkpoint_falls_back_to_the_full_transcript(h: Harness) {
    let db = &h.db;
    let ws = published(db, None).await;
    let ids = db
        .save_turns(&ws, &[user("a"), user("b"), user("c")])
        .await
        .unwrap();
    db.save_compaction(&ws, ids[1], &[user("sum")])
        .await
        .unwrap();
    assert_eq!(db.load_turns(&ws, LoadMode::Resume).await.unwrap().len(), 2);
    for bad in [
        "{not json",
        r#"{"summary_ids":[],"watermark":1}"#,
        r#"{"summary_ids":[424242],"watermark":0}"#,
    ] {
        h.raw
            .exec(&format!(
                "UPDATE workstream_config SET value = '{bad}' WHERE ws_id = '{ws}' AND key = '_turnstone.compaction_checkpoint'"
            ))
            .await;
        let resumed: Vec<String> = db
            .load_turns(&ws, LoadMode::Resume)
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.turn.content.unwrap())
            .collect();
        assert_eq!(resumed, ["a", "b", "c"], "checkpoint {bad} must be ignored");
        assert!(db.checkpoint(&ws).await.unwrap().is_none());
    }
}

async fn full_text_search_returns_message_role_ws_and_time(h: Harness) {
    let db = &h.db;
    let ws1 = published(db, None).await;
    let mine = db
        .create_workstream(&NewWorkstream {
            user_id: Some("alice".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    db.publish_workstream(&mine).await.unwrap();
    db.save_turn(&ws1, &user("The quick brown fox"))
        .await
        .unwrap();
    db.save_turn(
        &ws1,
        &NewTurn::text(Role::Assistant, "Foxes are quick, yes"),
    )
    .await
    .unwrap();
    db.save_turn(&mine.ws_id, &user("quick brown bread recipe"))
        .await
        .unwrap();
    let hidden = db
        .create_workstream(&NewWorkstream::default())
        .await
        .unwrap();
    db.save_turn(&hidden.ws_id, &user("quick brown secret"))
        .await
        .unwrap();

    let hits = db
        .search_history("Quick BROWN", &SearchFilter::default())
        .await
        .unwrap();
    let msgs: Vec<&str> = hits.iter().map(|h| h.message.as_str()).collect();
    assert_eq!(
        msgs,
        ["quick brown bread recipe", "The quick brown fox"],
        "AND of words, newest first"
    );
    assert_eq!(hits[1].ws_id, ws1);
    assert_eq!(hits[1].role, Role::User);
    assert!(hits[1].timestamp.ends_with('Z'));
    let filtered = db
        .search_history(
            "quick",
            &SearchFilter {
                user_id: Some("alice".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(filtered.len(), 1);
    let in_ws = db
        .search_history(
            "quick",
            &SearchFilter {
                ws_id: Some(ws1.clone()),
                limit: Some(1),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(in_ws.len(), 1);
    assert_eq!(in_ws[0].role, Role::Assistant);
    let next_page = db
        .search_history(
            "quick",
            &SearchFilter {
                ws_id: Some(ws1.clone()),
                limit: Some(1),
                offset: Some(1),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(next_page.len(), 1);
    assert_eq!(next_page[0].message, "The quick brown fox", "the older hit");
    assert!(
        db.search_history("zebra", &SearchFilter::default())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        db.search_history("fox", &SearchFilter::default())
            .await
            .unwrap()
            .len()
            == 1,
        "whole words"
    );
}

async fn hostile_search_input_is_plain_words(h: Harness) {
    let db = &h.db;
    let ws = published(db, None).await;
    db.save_turn(&ws, &user("error: NEAR the OR operator failed"))
        .await
        .unwrap();
    for q in [
        r#""unbalanced"#,
        "near(error operator)",
        "error OR",
        "*",
        "a AND -b",
        "'); DROP TABLE conversations; --",
        "   ",
        "ü",
    ] {
        let r = db.search_history(q, &SearchFilter::default()).await;
        assert!(r.is_ok(), "{q:?} → {r:?}");
    }
    let hits = db
        .search_history("error OR", &SearchFilter::default())
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "OR is a word here, not an operator");
    assert_eq!(db.count_turns(&ws).await.unwrap(), 1);
}

async fn bad_input_gets_typed_errors(h: Harness) {
    let db = &h.db;
    let ws = published(db, None).await;
    let huge = "x".repeat(MAX_CONTENT_BYTES + 1);
    assert!(matches!(
        db.save_turn(&ws, &user(&huge)).await,
        Err(StorageError::TooLarge {
            field: "content",
            ..
        })
    ));
    assert!(matches!(
        db.save_turn(&ws, &user("nul\0byte")).await,
        Err(StorageError::InvalidInput(_))
    ));
    let bad_utf8 = NewTurn::from_utf8(Role::Tool, vec![b'o', b'k', 0xff, 0xfe]);
    assert!(matches!(bad_utf8, Err(StorageError::InvalidInput(ref m)) if m.contains("offset 2")));
    assert!(matches!(
        db.save_turn("no-such-ws", &user("hi")).await,
        Err(StorageError::UnknownWorkstream(ref w)) if w == "no-such-ws"
    ));
    let bad_json = NewTurn {
        tool_calls: Some("[not json".into()),
        ..user("x")
    };
    assert!(matches!(
        db.save_turn(&ws, &bad_json).await,
        Err(StorageError::InvalidInput(_))
    ));
    // A failed batch writes nothing.
    assert!(db.save_turns(&ws, &[user("ok"), bad_json]).await.is_err());
    assert!(db.save_turns("no-such-ws", &[user("ok")]).await.is_err());
    assert_eq!(db.count_turns(&ws).await.unwrap(), 0);
    // Large but legal content round-trips intact.
    let big = "é".repeat(2 << 20);
    db.save_turn(&ws, &user(&big)).await.unwrap();
    let back = db.load_turns(&ws, LoadMode::Resume).await.unwrap();
    assert_eq!(back[0].turn.content.as_deref(), Some(big.as_str()));
}

/// A saved turn and memory are committed when the call returns: reads on the
/// other pooled connections, started right after, see them (sqlx#3430: a
/// driver can answer before an autocommit statement has committed).
async fn a_returned_write_is_visible_on_every_connection(h: Harness) {
    let db = &h.db;
    let ws = published(db, None).await;
    for i in 0..12 {
        let text = format!("turn {i}");
        // Large rows make the commit slow enough to lose a race with the reads.
        let big = format!("{text} {}", "é".repeat(1 << 20));
        db.save_turn(&ws, &user(&big)).await.unwrap();
        let saved = NewMemory {
            name: format!("m{i}"),
            description: String::new(),
            memory_type: None,
            scope: None,
            scope_id: String::new(),
            content: text.clone(),
        };
        db.save_memory(&saved).await.unwrap();
        // Readers in parallel take different connections from the pool.
        let reads = (0..6).map(|_| async {
            let turns = db.load_turns(&ws, LoadMode::Everything).await.unwrap();
            let memories = db.list_memories(None, None, None, 1000).await.unwrap();
            (turns.len(), memories.len())
        });
        for (turns, memories) in futures::future::join_all(reads).await {
            assert_eq!((turns, memories), (i + 1, i + 1), "write {i} not visible");
        }
    }
}
