//! Tool policies, audit queries and usage summaries on both backends.

mod common;

use common::*;
use turnstone_storage::prelude::*;

both_backends!(
    policies_are_listed_in_check_order_and_validated,
    audit_is_filtered_and_paged_newest_first,
    usage_is_summed_per_user_model_and_day
);

fn policy(name: &str, pattern: &str, action: PolicyAction, priority: i64) -> NewToolPolicy {
    NewToolPolicy {
        name: name.into(),
        tool_pattern: pattern.into(),
        action,
        role: None,
        priority,
        enabled: true,
        description: String::new(),
        created_by: Some("admin".into()),
    }
}

async fn policies_are_listed_in_check_order_and_validated(h: Harness) {
    let db = &h.db;
    let late = db
        .create_policy(&policy("late", "*", PolicyAction::Ask, 200))
        .await
        .unwrap();
    let first = db
        .create_policy(&NewToolPolicy {
            role: Some("viewer".into()),
            ..policy("no-mcp", "mcp__github__*", PolicyAction::Deny, 10)
        })
        .await
        .unwrap();
    assert_eq!(first.role.as_deref(), Some("viewer"));
    assert_eq!(first.action, PolicyAction::Deny);
    let names: Vec<String> = db
        .list_policies()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["no-mcp", "late"]);
    // A duplicate name is its own error; bad names, globs and roles are refused.
    let dup = db
        .create_policy(&policy("late", "bash", PolicyAction::Allow, 1))
        .await
        .unwrap_err();
    assert!(
        matches!(dup, StorageError::PolicyExists(ref n) if n == "late"),
        "{dup}"
    );
    for (p, why) in [
        (
            policy("bad name", "*", PolicyAction::Allow, 1),
            "policy name",
        ),
        (
            policy("x", "rm -rf", PolicyAction::Allow, 1),
            "tool pattern",
        ),
        (policy("x", "[", PolicyAction::Allow, 1), "tool pattern"),
        (policy("x", "*", PolicyAction::Allow, 5_000_000), "priority"),
        (
            NewToolPolicy {
                role: Some("a b".into()),
                ..policy("x", "*", PolicyAction::Allow, 1)
            },
            "role",
        ),
    ] {
        let e = db.create_policy(&p).await.unwrap_err();
        assert!(matches!(e, StorageError::InvalidInput(_)), "{e}");
        assert!(e.to_string().contains(why), "{e} should mention {why}");
    }
    // Update moves it to the front and disables it; delete removes it.
    let moved = db
        .update_policy(
            &late.policy_id,
            &NewToolPolicy {
                enabled: false,
                ..policy("late", "bash", PolicyAction::Allow, 1)
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!((moved.priority, moved.enabled), (1, false));
    assert_eq!(moved.created, late.created);
    assert_eq!(db.list_policies().await.unwrap()[0].name, "late");
    assert!(
        db.update_policy("nope", &policy("z", "*", PolicyAction::Ask, 1))
            .await
            .unwrap()
            .is_none()
    );
    assert!(db.delete_policy(&first.policy_id).await.unwrap());
    assert!(!db.delete_policy(&first.policy_id).await.unwrap());
    assert!(db.get_policy(&first.policy_id).await.unwrap().is_none());
    assert_eq!(db.list_policies().await.unwrap().len(), 1);
}

async fn audit_is_filtered_and_paged_newest_first(h: Harness) {
    let db = &h.db;
    let mut ids = Vec::new();
    for (user, action, target) in [
        ("alice", "auth.login", "alice"),
        ("bob", "auth.login_failed", "bob"),
        ("alice", "tool.approve", "ws1"),
        ("alice", "workstream.create", "ws1"),
        ("bob", "tool.deny", "ws2"),
    ] {
        ids.push(
            db.append_audit(&AuditEntry {
                id: 0,
                timestamp: String::new(),
                user_id: Some(user.into()),
                action: action.into(),
                target: Some(target.into()),
                detail: Some("{}".into()),
                ip: Some("127.0.0.1".into()),
            })
            .await
            .unwrap(),
        );
    }
    let q = |f: fn(&mut AuditQuery)| {
        let mut q = AuditQuery {
            limit: 100,
            ..Default::default()
        };
        f(&mut q);
        q
    };
    let actions = |v: Vec<AuditEntry>| v.into_iter().map(|e| e.action).collect::<Vec<_>>();
    let all = db.query_audit(&q(|_| {})).await.unwrap();
    assert_eq!(all.iter().map(|e| e.id).rev().collect::<Vec<_>>(), ids);
    assert_eq!(
        actions(
            db.query_audit(&q(|q| q.action = Some("auth.".into())))
                .await
                .unwrap()
        ),
        ["auth.login_failed", "auth.login"]
    );
    assert_eq!(
        actions(
            db.query_audit(&q(|q| q.action = Some("tool.*".into())))
                .await
                .unwrap()
        ),
        ["tool.deny", "tool.approve"]
    );
    assert_eq!(
        actions(
            db.query_audit(&q(|q| q.action = Some("auth.login".into())))
                .await
                .unwrap()
        ),
        ["auth.login"],
        "an exact action is not a prefix"
    );
    assert_eq!(
        actions(
            db.query_audit(&q(|q| {
                q.user_id = Some("alice".into());
                q.target = Some("ws1".into());
            }))
            .await
            .unwrap()
        ),
        ["workstream.create", "tool.approve"]
    );
    // Pages of two, by id.
    let page1 = db
        .query_audit(&AuditQuery {
            limit: 2,
            ..Default::default()
        })
        .await
        .unwrap();
    let page2 = db
        .query_audit(&AuditQuery {
            limit: 2,
            before_id: Some(page1[1].id),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(actions(page2), ["tool.approve", "auth.login_failed"]);
    // Time bounds.
    let future = db
        .query_audit(&q(|q| q.since = Some("2999-01-01".into())))
        .await
        .unwrap();
    assert!(future.is_empty());
    let past = db
        .query_audit(&q(|q| q.until = Some("2000-01-01".into())))
        .await
        .unwrap();
    assert!(past.is_empty());
}

async fn usage_is_summed_per_user_model_and_day(h: Harness) {
    let db = &h.db;
    let call = |user: &str, alias: &str, p: i64, c: i64, latency: i64, purpose: &str| UsageEvent {
        user_id: Some(user.into()),
        ws_id: Some("ws".into()),
        model: Some(format!("{alias}-model")),
        model_alias: Some(alias.into()),
        prompt_tokens: p,
        completion_tokens: c,
        cached_tokens: p / 2,
        cache_creation_tokens: 1,
        reasoning_tokens: 0,
        tool_calls: 1,
        latency_ms: latency,
        purpose: purpose.into(),
    };
    for u in [
        call("alice", "fast", 100, 10, 10, "turn"),
        call("alice", "fast", 300, 30, 30, "judge"),
        call("alice", "big", 1000, 100, 100, "turn"),
        call("bob", "fast", 50, 5, 50, "title"),
    ] {
        db.record_usage(&u).await.unwrap();
    }
    // An old row on another day.
    h.raw
        .exec(
            "UPDATE usage_events SET timestamp = '2026-01-02T03:04:05.000Z' WHERE user_id = 'bob'",
        )
        .await;
    let total = db.usage_summary(&UsageQuery::default()).await.unwrap();
    assert_eq!(total.len(), 1);
    assert_eq!(
        (
            total[0].calls,
            total[0].prompt_tokens,
            total[0].completion_tokens
        ),
        (4, 1450, 145)
    );
    assert_eq!(total[0].cached_tokens, 725);
    assert_eq!(total[0].cache_creation_tokens, 4);
    assert_eq!(total[0].avg_latency_ms, 47, "(10+30+100+50)/4 rounded down");
    let by = db
        .usage_summary(&UsageQuery {
            group_by: vec![UsageGroup::User, UsageGroup::Model],
            ..Default::default()
        })
        .await
        .unwrap();
    let rows: Vec<(String, String, i64, i64)> = by
        .iter()
        .map(|r| {
            assert!(r.day.is_none());
            (
                r.user_id.clone().unwrap(),
                r.model.clone().unwrap(),
                r.calls,
                r.prompt_tokens,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("alice".into(), "big".into(), 1, 1000),
            ("alice".into(), "fast".into(), 2, 400),
            ("bob".into(), "fast".into(), 1, 50),
        ]
    );
    let by_day = db
        .usage_summary(&UsageQuery {
            group_by: vec![UsageGroup::Day],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_day.len(), 2);
    assert_eq!(by_day[0].day.as_deref(), Some("2026-01-02"));
    assert_eq!(by_day[0].calls, 1);
    let alice_fast = db
        .usage_summary(&UsageQuery {
            user_id: Some("alice".into()),
            model_alias: Some("fast".into()),
            since: Some("2026-06-01".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!((alice_fast[0].calls, alice_fast[0].prompt_tokens), (2, 400));
}
