//! Workstream lifecycle on both backends.

mod common;

use common::*;
use std::time::Duration;
use turnstone_storage::prelude::*;

both_backends!(
    reservation_is_hidden_until_published_by_its_token,
    resolve_by_alias_id_and_prefix,
    listing_shows_only_workstreams_with_history,
    prune_spares_aliased_recent_and_creating_rows,
    reap_removes_only_old_unexcluded_reservations,
    fork_copies_the_resume_view_and_config_atomically,
    config_round_trips_and_reserves_private_keys,
    a_generated_title_never_overwrites_a_name,
);

async fn a_generated_title_never_overwrites_a_name(h: Harness) {
    let db = &h.db;
    let fresh = published(db, None).await;
    assert!(db.set_title_if_unnamed(&fresh, "Generated").await.unwrap());
    let w = db.get_workstream(&fresh).await.unwrap().unwrap();
    assert_eq!(w.title.as_deref(), Some("Generated"));
    assert!(
        !db.set_title_if_unnamed(&fresh, "Second").await.unwrap(),
        "titled once"
    );
    let named = published(db, None).await;
    db.set_title(&named, Some("Mine")).await.unwrap();
    assert!(!db.set_title_if_unnamed(&named, "Generated").await.unwrap());
    let aliased = published(db, None).await;
    db.set_alias(&aliased, Some("work")).await.unwrap();
    assert!(
        !db.set_title_if_unnamed(&aliased, "Generated")
            .await
            .unwrap()
    );
    assert_eq!(
        db.get_workstream(&named)
            .await
            .unwrap()
            .unwrap()
            .title
            .as_deref(),
        Some("Mine")
    );
    assert!(
        db.get_workstream(&aliased)
            .await
            .unwrap()
            .unwrap()
            .title
            .is_none()
    );
    assert!(matches!(
        db.set_title_if_unnamed(&fresh, "bad\0title").await,
        Err(StorageError::InvalidInput(_))
    ));
}

async fn reservation_is_hidden_until_published_by_its_token(h: Harness) {
    let db = &h.db;
    let r = db
        .create_workstream(&NewWorkstream {
            name: "w".into(),
            alias: Some("fresh".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r.ws_id.len(), 32);
    assert!(
        db.get_workstream(&r.ws_id).await.unwrap().is_none(),
        "creating rows are hidden"
    );
    assert!(matches!(
        db.resolve_workstream("fresh").await,
        Err(StorageError::NotFound(_))
    ));
    // The token never appears in reads.
    let forged = Reservation {
        ws_id: r.ws_id.clone(),
        token: "0".repeat(32),
    };
    assert!(!db.publish_workstream(&forged).await.unwrap());
    assert!(!db.discard_workstream(&forged).await.unwrap());
    assert!(db.publish_workstream(&r).await.unwrap());
    assert!(
        !db.publish_workstream(&r).await.unwrap(),
        "publish is a one-shot CAS"
    );
    assert!(
        !db.discard_workstream(&r).await.unwrap(),
        "a published row cannot be discarded"
    );
    let ws = db.get_workstream(&r.ws_id).await.unwrap().unwrap();
    assert_eq!(ws.state, WorkstreamState::Idle);
    assert_eq!(ws.alias.as_deref(), Some("fresh"));

    let r2 = db
        .create_workstream(&NewWorkstream::default())
        .await
        .unwrap();
    assert!(db.discard_workstream(&r2).await.unwrap());
    assert!(db.get_workstream(&r2.ws_id).await.unwrap().is_none());

    // Same id again → typed error; duplicate alias → typed error.
    let dup = db
        .create_workstream(&NewWorkstream {
            ws_id: Some(r.ws_id.clone()),
            ..Default::default()
        })
        .await;
    assert!(
        matches!(dup, Err(StorageError::WorkstreamExists(_))),
        "{dup:?}"
    );
    let dup_alias = db
        .create_workstream(&NewWorkstream {
            alias: Some("fresh".into()),
            ..Default::default()
        })
        .await;
    assert!(
        matches!(dup_alias, Err(StorageError::DuplicateAlias(ref a)) if a == "fresh"),
        "{dup_alias:?}"
    );
    let bad = db
        .create_workstream(&NewWorkstream {
            ws_id: Some("../x".into()),
            ..Default::default()
        })
        .await;
    assert!(matches!(bad, Err(StorageError::InvalidInput(_))));
    db.set_workstream_state(&r.ws_id, WorkstreamState::Running)
        .await
        .unwrap();
    assert_eq!(
        db.get_workstream(&r.ws_id).await.unwrap().unwrap().state,
        WorkstreamState::Running
    );
    assert!(
        db.set_workstream_state(&r.ws_id, WorkstreamState::Creating)
            .await
            .is_err()
    );
    assert!(matches!(
        db.set_workstream_state("nope", WorkstreamState::Idle).await,
        Err(StorageError::UnknownWorkstream(_))
    ));
}

async fn resolve_by_alias_id_and_prefix(h: Harness) {
    let db = &h.db;
    for id in ["abcd1111", "abcd2222", "ffff0000"] {
        let r = db
            .create_workstream(&NewWorkstream {
                ws_id: Some(id.into()),
                ..Default::default()
            })
            .await
            .unwrap();
        db.publish_workstream(&r).await.unwrap();
    }
    db.set_alias("ffff0000", Some("refactor")).await.unwrap();
    assert_eq!(
        db.resolve_workstream("refactor").await.unwrap().ws_id,
        "ffff0000"
    );
    assert_eq!(
        db.resolve_workstream("abcd1111").await.unwrap().ws_id,
        "abcd1111"
    );
    assert_eq!(
        db.resolve_workstream("abcd2").await.unwrap().ws_id,
        "abcd2222"
    );
    assert_eq!(
        db.resolve_workstream("ffff").await.unwrap().ws_id,
        "ffff0000"
    );
    assert!(matches!(
        db.resolve_workstream("abcd").await,
        Err(StorageError::Ambiguous { count: 2, .. })
    ));
    assert!(matches!(
        db.resolve_workstream("zzz").await,
        Err(StorageError::NotFound(_))
    ));
    // LIKE metacharacters are literal.
    assert!(matches!(
        db.resolve_workstream("%").await,
        Err(StorageError::NotFound(_))
    ));
    assert!(matches!(
        db.resolve_workstream("").await,
        Err(StorageError::InvalidInput(_))
    ));
    assert!(matches!(
        db.set_alias("abcd1111", Some("refactor")).await,
        Err(StorageError::DuplicateAlias(_))
    ));
    assert!(matches!(
        db.set_alias("abcd1111", Some("bad alias")).await,
        Err(StorageError::InvalidInput(_))
    ));
}

async fn listing_shows_only_workstreams_with_history(h: Harness) {
    let db = &h.db;
    let a = published(db, None).await;
    let b = published(db, None).await;
    let _empty = published(db, None).await;
    let mine = db
        .create_workstream(&NewWorkstream {
            user_id: Some("u1".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    db.publish_workstream(&mine).await.unwrap();
    db.save_turn(&a, &user("one")).await.unwrap();
    db.save_turn(&b, &user("two")).await.unwrap();
    db.save_turn(&b, &user("three")).await.unwrap();
    db.save_turn(&mine.ws_id, &user("mine")).await.unwrap();
    // A sub-agent's transcript is listed under its parent, not here.
    let task = db
        .create_workstream(&NewWorkstream {
            kind: Some("task_agent".into()),
            parent_ws_id: Some(a.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    db.publish_workstream(&task).await.unwrap();
    db.save_turn(&task.ws_id, &user("task")).await.unwrap();
    let children = db.list_children(&a).await.unwrap();
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].ws_id, task.ws_id);
    assert!(db.list_children(&b).await.unwrap().is_empty());
    let all = db
        .list_workstreams_with_history(None, 100, 0)
        .await
        .unwrap();
    let ids: Vec<&str> = all.iter().map(|s| s.workstream.ws_id.as_str()).collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert_eq!(ids[0], mine.ws_id, "newest activity first");
    let b_row = all.iter().find(|s| s.workstream.ws_id == b).unwrap();
    assert_eq!(b_row.message_count, 2);
    let only_mine = db
        .list_workstreams_with_history(Some("u1"), 100, 0)
        .await
        .unwrap();
    assert_eq!(only_mine.len(), 1);
    let paged = db.list_workstreams_with_history(None, 1, 1).await.unwrap();
    assert_eq!(paged.len(), 1);
    assert_eq!(paged[0].workstream.ws_id, ids[1]);
}

async fn prune_spares_aliased_recent_and_creating_rows(h: Harness) {
    let db = &h.db;
    let old_unnamed = published(db, None).await;
    let old_named = published(db, Some("keep-me")).await;
    let recent = published(db, None).await;
    let old_empty = published(db, None).await;
    let recent_empty = published(db, None).await;
    let creating = db
        .create_workstream(&NewWorkstream::default())
        .await
        .unwrap();
    for ws in [&old_unnamed, &old_named, &recent] {
        db.save_turn(ws, &user("hi")).await.unwrap();
    }
    let old = "2020-01-01T00:00:00.000Z";
    h.raw
        .exec(&format!(
            "UPDATE conversations SET timestamp = '{old}' WHERE ws_id IN ('{old_unnamed}', '{old_named}')"
        ))
        .await;
    h.raw
        .exec(&format!(
            "UPDATE workstreams SET updated = '{old}' WHERE ws_id IN ('{old_unnamed}', '{old_named}', '{old_empty}', '{}')",
            creating.ws_id
        ))
        .await;
    let removed = db
        .prune_workstreams(
            Some(Duration::from_secs(90 * 86400)),
            Duration::from_secs(3600),
        )
        .await
        .unwrap();
    let mut expected = vec![old_unnamed.clone(), old_empty.clone()];
    expected.sort();
    assert_eq!(removed, expected);
    for kept in [&old_named, &recent, &recent_empty] {
        assert!(db.get_workstream(kept).await.unwrap().is_some());
    }
    assert_eq!(
        db.count_turns(&old_unnamed).await.unwrap(),
        0,
        "history goes with the row"
    );
    assert!(
        db.publish_workstream(&creating).await.unwrap(),
        "creating rows are never pruned"
    );
}

async fn reap_removes_only_old_unexcluded_reservations(h: Harness) {
    let db = &h.db;
    let old_a = db
        .create_workstream(&NewWorkstream::default())
        .await
        .unwrap();
    let old_b = db
        .create_workstream(&NewWorkstream::default())
        .await
        .unwrap();
    let fresh = db
        .create_workstream(&NewWorkstream::default())
        .await
        .unwrap();
    let live = published(db, None).await;
    h.raw
        .exec(&format!(
            "UPDATE workstreams SET updated = '2020-01-01T00:00:00.000Z' WHERE ws_id IN ('{}', '{}', '{live}')",
            old_a.ws_id, old_b.ws_id
        ))
        .await;
    let reaped = db
        .reap_abandoned_creates(
            Duration::from_secs(2 * 3600),
            std::slice::from_ref(&old_b.ws_id),
        )
        .await
        .unwrap();
    assert_eq!(reaped, vec![old_a.ws_id.clone()]);
    assert!(!db.publish_workstream(&old_a).await.unwrap());
    assert!(
        db.publish_workstream(&old_b).await.unwrap(),
        "excluded reservation survives"
    );
    assert!(
        db.publish_workstream(&fresh).await.unwrap(),
        "young reservation survives"
    );
    assert!(
        db.get_workstream(&live).await.unwrap().is_some(),
        "published rows are not reaped"
    );
}

async fn fork_copies_the_resume_view_and_config_atomically(h: Harness) {
    let db = &h.db;
    let src = published(db, None).await;
    let ids = db
        .save_turns(
            &src,
            &(0..6).map(|i| user(&format!("m{i}"))).collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    db.save_compaction(
        &src,
        ids[3],
        &[
            user("summary label"),
            NewTurn::text(Role::Assistant, "summary"),
        ],
    )
    .await
    .unwrap();
    db.save_turn(&src, &user("after")).await.unwrap();
    db.set_config(&src, "temperature", Some("0.3"))
        .await
        .unwrap();
    let src_view: Vec<Option<String>> = db
        .load_turns(&src, LoadMode::Resume)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.turn.content)
        .collect();
    assert_eq!(
        src_view,
        ["summary label", "summary", "m4", "m5", "after"].map(|s| Some(s.to_string()))
    );

    let dest = db
        .create_workstream(&NewWorkstream::default())
        .await
        .unwrap();
    let wrong = Reservation {
        ws_id: dest.ws_id.clone(),
        token: "f".repeat(32),
    };
    assert!(matches!(
        db.fork_workstream(&src, &wrong).await,
        Err(StorageError::TokenMismatch(_))
    ));
    assert!(matches!(
        db.fork_workstream("missing", &dest).await,
        Err(StorageError::UnknownWorkstream(_))
    ));
    assert_eq!(db.fork_workstream(&src, &dest).await.unwrap(), 5);
    assert!(
        db.get_workstream(&dest.ws_id).await.unwrap().is_none(),
        "still a reservation"
    );
    assert!(db.publish_workstream(&dest).await.unwrap());
    let dest_view: Vec<Option<String>> = db
        .load_turns(&dest.ws_id, LoadMode::Resume)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.turn.content)
        .collect();
    assert_eq!(dest_view, src_view);
    assert!(db.checkpoint(&dest.ws_id).await.unwrap().is_some());
    assert_eq!(
        db.get_config(&dest.ws_id, "temperature")
            .await
            .unwrap()
            .as_deref(),
        Some("0.3")
    );
    // A second fork into the now non-empty destination is refused.
    let again = Reservation {
        ws_id: dest.ws_id.clone(),
        token: dest.token.clone(),
    };
    assert!(db.fork_workstream(&src, &again).await.is_err());
    // The source is untouched.
    assert_eq!(db.count_turns(&src).await.unwrap(), 9);
}

async fn config_round_trips_and_reserves_private_keys(h: Harness) {
    let db = &h.db;
    let ws = published(db, None).await;
    db.set_config(&ws, "model", Some("local")).await.unwrap();
    db.set_config(&ws, "model", Some("claude")).await.unwrap();
    db.set_config(&ws, "persona", Some("terse")).await.unwrap();
    assert_eq!(
        db.get_config(&ws, "model").await.unwrap().as_deref(),
        Some("claude")
    );
    db.save_compaction(&ws, 0, &[user("s")]).await.unwrap();
    let all = db.list_config(&ws).await.unwrap();
    assert_eq!(
        all,
        vec![
            ("model".to_string(), Some("claude".to_string())),
            ("persona".to_string(), Some("terse".to_string()))
        ],
        "reserved keys are filtered"
    );
    assert!(
        db.set_config(&ws, "_turnstone.compaction_checkpoint", Some("x"))
            .await
            .is_err()
    );
    assert!(
        db.get_config(&ws, "_turnstone.compaction_checkpoint")
            .await
            .unwrap()
            .is_none()
    );
    db.set_config(&ws, "persona", None).await.unwrap();
    assert!(db.get_config(&ws, "persona").await.unwrap().is_none());
    assert!(matches!(
        db.set_config("missing", "k", Some("v")).await,
        Err(StorageError::UnknownWorkstream(_))
    ));
}
