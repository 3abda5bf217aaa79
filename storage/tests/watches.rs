//! Watches on both backends: limits, claims that never overlap between
//! nodes, fenced poll records, cancel, and results kept until delivered;
//! notification targets; preview content.

mod common;

use common::*;
use std::collections::HashSet;
use turnstone_storage::prelude::*;
use turnstone_storage::util::{format_ts, now};

both_backends!(
    watches_are_limited_per_workstream_and_named_uniquely,
    a_claim_is_one_nodes_until_it_lapses_and_polls_are_fenced,
    two_nodes_claiming_at_once_never_share_a_watch,
    ended_watches_wait_for_delivery_and_cancel_needs_none,
    notify_targets_belong_to_a_user_or_a_workstream,
    previews_are_content_addressed_capped_and_go_with_the_workstream,
);

fn new_watch(ws: &str, name: &str) -> NewWatch {
    NewWatch {
        ws_id: ws.into(),
        name: name.into(),
        command: "gh pr checks".into(),
        interval_secs: 30,
        condition: Some("exit_code == 0".into()),
        max_polls: 10,
        plugin: "watch".into(),
    }
}

fn later(secs: u64) -> String {
    format_ts(std::time::SystemTime::now() + std::time::Duration::from_secs(secs))
}

fn poll(state: &str, next: Option<String>, result: Option<&str>) -> PollRecord {
    PollRecord {
        output: "out".into(),
        exit_code: 1,
        error: None,
        state: state.into(),
        next_poll: next,
        result: result.map(str::to_string),
    }
}

async fn watches_are_limited_per_workstream_and_named_uniquely(h: Harness) {
    let db = &h.db;
    let ws = published(db, None).await;
    let other = published(db, None).await;
    let w = db.create_watch(&new_watch(&ws, "ci"), 2).await.unwrap();
    assert_eq!((w.state.as_str(), w.poll_count), ("active", 0));
    assert!(w.next_poll.is_some(), "due at once");
    let e = db.create_watch(&new_watch(&ws, "ci"), 2).await.unwrap_err();
    assert!(e.to_string().contains("named \"ci\" exists"), "{e}");
    // The same name in another workstream is fine.
    db.create_watch(&new_watch(&other, "ci"), 2).await.unwrap();
    db.create_watch(&new_watch(&ws, "deploy"), 2).await.unwrap();
    let e = db
        .create_watch(&new_watch(&ws, "third"), 2)
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("already has 2 active watches"),
        "{e}"
    );
    let mut names: Vec<String> = db
        .list_watches(&ws, true)
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.name)
        .collect();
    // The list is in creation order to the millisecond; two watches created
    // in the same millisecond (as here, on a fast machine) follow their ids.
    names.sort();
    assert_eq!(names, ["ci", "deploy"]);
    // A cancelled watch frees its name and its place.
    let c = db.cancel_watch(&ws, "ci").await.unwrap().unwrap();
    assert_eq!(c.state, "cancelled");
    assert!(db.cancel_watch(&ws, "ci").await.unwrap().is_none());
    db.create_watch(&new_watch(&ws, "ci"), 2).await.unwrap();
    assert_eq!(db.list_watches(&ws, false).await.unwrap().len(), 3);
    // By id prefix, and an unknown workstream is refused by the foreign key.
    let d = db.list_watches(&ws, true).await.unwrap()[0].clone();
    let got = db
        .cancel_watch(&ws, &d.watch_id[..6])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.watch_id, d.watch_id);
    assert!(
        db.create_watch(&new_watch("nope", "x"), 2).await.is_err(),
        "a watch needs its workstream"
    );
}

async fn a_claim_is_one_nodes_until_it_lapses_and_polls_are_fenced(h: Harness) {
    let db = &h.db;
    let ws = published(db, None).await;
    let w = db.create_watch(&new_watch(&ws, "ci"), 5).await.unwrap();
    let t = later(1);
    let a = db
        .claim_due_watches("node-a", &t, &later(60), 10, None)
        .await
        .unwrap();
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].claimed_by.as_deref(), Some("node-a"));
    // Held: node b gets nothing, until the lease lapses.
    assert!(
        db.claim_due_watches("node-b", &t, &later(60), 10, None)
            .await
            .unwrap()
            .is_empty()
    );
    let after_lease = later(120);
    let b = db
        .claim_due_watches("node-b", &after_lease, &later(180), 10, None)
        .await
        .unwrap();
    assert_eq!(b.len(), 1, "a lapsed claim is taken over");
    // node a's late record is refused: it lost the watch.
    assert!(
        !db.record_poll(
            &w.watch_id,
            "node-a",
            &poll("active", Some(later(30)), None)
        )
        .await
        .unwrap()
    );
    assert!(
        db.record_poll(
            &w.watch_id,
            "node-b",
            &poll("active", Some(later(30)), None)
        )
        .await
        .unwrap()
    );
    let got = db.get_watch(&w.watch_id).await.unwrap().unwrap();
    assert_eq!(got.poll_count, 1);
    assert_eq!(got.claimed_by, None, "released");
    assert_eq!(got.last_exit_code, Some(1));
    // Not due before its next poll; the workstream filter narrows claims.
    assert!(
        db.claim_due_watches("node-a", &now(), &later(60), 10, None)
            .await
            .unwrap()
            .is_empty()
    );
    let due = db.next_watch_due(None).await.unwrap().unwrap();
    assert!(due > now(), "{due}");
    assert!(
        db.claim_due_watches(
            "node-a",
            &later(40),
            &later(90),
            10,
            Some(&["other".to_string()])
        )
        .await
        .unwrap()
        .is_empty()
    );
    assert!(
        db.claim_due_watches("node-a", &later(40), &later(90), 10, Some(&[]))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        db.claim_due_watches(
            "node-a",
            &later(40),
            &later(90),
            10,
            Some(std::slice::from_ref(&ws))
        )
        .await
        .unwrap()
        .len(),
        1
    );
    // A cancelled watch cannot be recorded by its claimant either.
    db.cancel_watch(&ws, "ci").await.unwrap().unwrap();
    assert!(
        !db.record_poll(
            &w.watch_id,
            "node-a",
            &poll("active", Some(later(30)), None)
        )
        .await
        .unwrap()
    );
}

async fn two_nodes_claiming_at_once_never_share_a_watch(h: Harness) {
    let db = &h.db;
    let mut all = HashSet::new();
    for i in 0..10 {
        let ws = published(db, None).await;
        for j in 0..4 {
            all.insert(
                db.create_watch(&new_watch(&ws, &format!("w{i}-{j}")), 5)
                    .await
                    .unwrap()
                    .watch_id,
            );
        }
    }
    let t = later(1);
    let until = later(60);
    let claims = (0..4).map(|n| {
        let db = db.clone();
        let (t, until) = (t.clone(), until.clone());
        tokio::spawn(async move {
            let mut mine = Vec::new();
            for _ in 0..10 {
                let got = db
                    .claim_due_watches(&format!("node-{n}"), &t, &until, 3, None)
                    .await
                    .unwrap();
                mine.extend(got.into_iter().map(|w| w.watch_id));
            }
            mine
        })
    });
    let mut seen = HashSet::new();
    for c in futures::future::join_all(claims).await {
        for id in c.unwrap() {
            assert!(seen.insert(id.clone()), "{id} claimed twice");
        }
    }
    assert_eq!(seen, all, "every watch claimed exactly once");
}

async fn ended_watches_wait_for_delivery_and_cancel_needs_none(h: Harness) {
    let db = &h.db;
    let ws = published(db, None).await;
    let fired = db.create_watch(&new_watch(&ws, "a"), 5).await.unwrap();
    let cancelled = db.create_watch(&new_watch(&ws, "b"), 5).await.unwrap();
    let t = later(1);
    db.claim_due_watches("n", &t, &later(60), 10, None)
        .await
        .unwrap();
    assert!(
        db.record_poll(
            &fired.watch_id,
            "n",
            &poll("fired", None, Some("Watch a fired."))
        )
        .await
        .unwrap()
    );
    db.cancel_watch(&ws, &cancelled.watch_id)
        .await
        .unwrap()
        .unwrap();
    let pending = db.undelivered_watches(None).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].result.as_deref(), Some("Watch a fired."));
    assert_eq!(pending[0].state, "fired");
    assert!(db.mark_watch_delivered(&fired.watch_id).await.unwrap());
    assert!(
        !db.mark_watch_delivered(&fired.watch_id).await.unwrap(),
        "once"
    );
    assert!(db.undelivered_watches(None).await.unwrap().is_empty());
    assert!(
        db.next_watch_due(None).await.unwrap().is_none(),
        "none active"
    );
    // Deleting the workstream deletes its watches.
    db.delete_workstream(&ws).await.unwrap();
    assert!(db.get_watch(&fired.watch_id).await.unwrap().is_none());
}

async fn notify_targets_belong_to_a_user_or_a_workstream(h: Harness) {
    let db = &h.db;
    let ws = published(db, None).await;
    let hook = |user: Option<&str>, ws: Option<&str>, name: &str, url: &str| NewNotifyTarget {
        user_id: user.map(str::to_string),
        ws_id: ws.map(str::to_string),
        name: name.into(),
        kind: "webhook".into(),
        url: Some(url.into()),
        ..Default::default()
    };
    db.save_notify_target(&hook(Some("alice"), None, "ops", "https://a.example/1"))
        .await
        .unwrap();
    db.save_notify_target(&hook(Some("bob"), None, "ops", "https://b.example/1"))
        .await
        .unwrap();
    db.save_notify_target(&hook(
        Some("alice"),
        Some(&ws),
        "build",
        "https://a.example/ws",
    ))
    .await
    .unwrap();
    // Saving again under the same name replaces it.
    db.save_notify_target(&hook(Some("alice"), None, "ops", "https://a.example/2"))
        .await
        .unwrap();
    let mine = db
        .list_notify_targets(Some("alice"), Some(&ws))
        .await
        .unwrap();
    let got: Vec<(&str, &str)> = mine
        .iter()
        .map(|t| (t.name.as_str(), t.url.as_deref().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            ("build", "https://a.example/ws"),
            ("ops", "https://a.example/2")
        ]
    );
    let bobs = db.list_notify_targets(Some("bob"), None).await.unwrap();
    assert_eq!(bobs.len(), 1);
    assert_eq!(bobs[0].url.as_deref(), Some("https://b.example/1"));
    for bad in [
        hook(Some("a"), None, "bad name", "https://x"),
        hook(Some("a"), None, "x", "ftp://x"),
        NewNotifyTarget {
            kind: "channel".into(),
            ..hook(Some("a"), None, "c", "https://x")
        },
        hook(None, None, "x", "https://x"),
    ] {
        assert!(matches!(
            db.save_notify_target(&bad).await,
            Err(StorageError::InvalidInput(_))
        ));
    }
    assert!(
        db.delete_notify_target(Some("alice"), None, "ops")
            .await
            .unwrap()
    );
    assert!(
        !db.delete_notify_target(Some("alice"), None, "ops")
            .await
            .unwrap()
    );
    assert!(
        !db.delete_notify_target(Some("bob"), None, "build")
            .await
            .unwrap()
    );
    // A workstream's targets go with it.
    db.delete_workstream(&ws).await.unwrap();
    assert!(
        db.list_notify_targets(Some("alice"), Some(&ws))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn previews_are_content_addressed_capped_and_go_with_the_workstream(h: Harness) {
    let db = &h.db;
    let ws = published(db, None).await;
    let other = published(db, None).await;
    let page = |ws: &str, title: &str, content: &[u8]| NewPreview {
        ws_id: ws.into(),
        kind: "html".into(),
        title: title.into(),
        media_type: "text/html".into(),
        content: content.to_vec(),
        call_id: Some("c1".into()),
    };
    let a = db
        .save_preview(&page(&ws, "first", b"<p>a</p>"))
        .await
        .unwrap();
    assert_eq!(a.preview_id.len(), 32);
    assert_eq!(a.size_bytes, 8);
    // The same bytes again are the same preview, retitled.
    let again = db
        .save_preview(&page(&ws, "second", b"<p>a</p>"))
        .await
        .unwrap();
    assert_eq!(again.preview_id, a.preview_id);
    assert_eq!(again.title, "second");
    let b = db.save_preview(&page(&ws, "b", b"<p>b</p>")).await.unwrap();
    assert_ne!(b.preview_id, a.preview_id);
    let listed: Vec<String> = db
        .list_previews(&ws)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.title)
        .collect();
    assert_eq!(listed.len(), 2);
    assert!(listed.contains(&"second".to_string()) && listed.contains(&"b".to_string()));
    let (info, bytes) = db.get_preview(&ws, &a.preview_id).await.unwrap().unwrap();
    assert_eq!(
        (info.title.as_str(), bytes.as_slice()),
        ("second", b"<p>a</p>".as_slice())
    );
    // Another workstream does not see it, even by id.
    assert!(
        db.get_preview(&other, &a.preview_id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(db.list_previews(&other).await.unwrap().is_empty());
    // An unknown workstream is refused.
    assert!(
        db.save_preview(&page("0123456789abcdef0123456789abcdef", "x", b"x"))
            .await
            .is_err()
    );
    // The per-workstream total holds.
    let big = vec![b'x'; MAX_PREVIEW_BYTES_PER_WORKSTREAM];
    assert!(matches!(
        db.save_preview(&page(&ws, "big", &big)).await,
        Err(StorageError::TooLarge { .. })
    ));
    assert_eq!(db.list_previews(&ws).await.unwrap().len(), 2);
    db.delete_workstream(&ws).await.unwrap();
    assert!(db.get_preview(&ws, &b.preview_id).await.unwrap().is_none());
}
