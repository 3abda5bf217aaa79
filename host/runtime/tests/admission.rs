//! Admission to the instance slots, through the real runtime and a real
//! component: calls beyond the slots wait in line, fail clearly when the
//! wait runs out, and can be cancelled while they wait.

mod common;

use common::*;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use turnstone_runtime::engine::EngineOptions;
use turnstone_runtime::{CallError, LoadedPlugin, Runtime, RuntimeOptions};

/// A runtime admitting `slots` calls at once, each waiting up to `wait`.
fn runtime_with(slots: u32, wait: Duration) -> Runtime {
    Runtime::new(RuntimeOptions {
        cache_dir: Some(target_dir().join("test-cache")),
        engine: EngineOptions {
            max_instances: slots,
            admission_wait: wait,
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap()
}

/// Waits (up to 5 s, else fails) until `cond` holds.
async fn eventually(cond: impl Fn() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < Duration::from_secs(5), "never happened");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn sleeper(rt: &Runtime) -> Arc<LoadedPlugin> {
    Arc::new(load(rt, "test-components", "hostile", Default::default()).await)
}

async fn sleep_call(
    p: Arc<LoadedPlugin>,
    ms: u64,
    cancel: Option<CancellationToken>,
) -> Result<String, CallError> {
    let (_t, ws) = workspace();
    let args = serde_json::json!({ "ms": ms }).to_string();
    p.execute("sleep", &args, &ctx(&ws), sink(), cancel.as_ref())
        .await
        .map(|r| r.output)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_the_slots_wait_their_turn_and_all_finish() {
    let rt = runtime_with(2, Duration::from_secs(20));
    let p = sleeper(&rt).await;
    let slots = p.instance_slots().clone();
    let started = Instant::now();
    let calls: Vec<_> = (0..3)
        .map(|_| tokio::spawn(sleep_call(p.clone(), 400, None)))
        .collect();
    // Two run; the third waits for one of them.
    let mut seen_waiting = false;
    for _ in 0..50 {
        if slots.waiting() == 1 && slots.in_use() == 2 {
            seen_waiting = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(seen_waiting, "a third call waits while two hold the slots");
    for c in calls {
        let out = c.await.unwrap().expect("every call runs in the end");
        assert!(out.contains("slept="), "{out}");
    }
    assert!(
        started.elapsed() >= Duration::from_millis(800),
        "the third ran after a slot freed: {:?}",
        started.elapsed()
    );
    assert_eq!((slots.in_use(), slots.waiting()), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_cannot_get_a_slot_in_time_fails_clearly_and_runs_nothing() {
    let rt = runtime_with(2, Duration::from_millis(150));
    let p = sleeper(&rt).await;
    let calls: Vec<_> = (0..3)
        .map(|_| tokio::spawn(sleep_call(p.clone(), 1500, None)))
        .collect();
    let mut ok = 0;
    let mut refused = Vec::new();
    for c in calls {
        match c.await.unwrap() {
            Ok(_) => ok += 1,
            Err(e) => refused.push(e),
        }
    }
    assert_eq!(ok, 2, "{refused:?}");
    assert_eq!(refused.len(), 1);
    match &refused[0] {
        CallError::AtCapacity {
            plugin,
            capacity,
            waited,
        } => {
            assert_eq!(plugin, "hostile");
            assert_eq!(*capacity, 2);
            assert_eq!(*waited, Duration::from_millis(150));
        }
        other => panic!("expected AtCapacity, got {other}"),
    }
    let text = refused[0].to_string();
    assert!(text.contains("all 2 plugin instance slots"), "{text}");
    // The refused call never started, so the plugin counted it as failed
    // but the slots are all free again and a new call runs at once.
    assert_eq!(p.instance_slots().in_use(), 0);
    let again = sleep_call(p.clone(), 10, None).await.unwrap();
    assert!(again.contains("slept="), "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_for_a_slot_can_be_cancelled() {
    let rt = runtime_with(1, Duration::from_secs(30));
    let p = sleeper(&rt).await;
    let holder = tokio::spawn(sleep_call(p.clone(), 1500, None));
    eventually(|| p.instance_slots().in_use() == 1).await;
    let cancel = CancellationToken::new();
    let waiter = tokio::spawn(sleep_call(p.clone(), 10, Some(cancel.clone())));
    eventually(|| p.instance_slots().waiting() == 1).await;
    let asked = Instant::now();
    cancel.cancel();
    let err = waiter.await.unwrap().unwrap_err();
    assert!(matches!(err, CallError::Cancelled { .. }), "{err}");
    assert!(asked.elapsed() < Duration::from_millis(500));
    assert_eq!(p.instance_slots().waiting(), 0);
    holder.await.unwrap().unwrap();
}
