//! Admission to the pooling allocator's instance slots.
//!
//! Every call runs in a fresh instance, and the pool reserves a fixed number
//! of slots. Without admission a call beyond the last slot fails at once
//! ("maximum concurrent instance limit"): a burst of 1,100 turns on a node
//! with 1,024 slots would fail 76 of them. With it, a call waits in line for
//! a slot, up to [`InstanceSlots::wait`], and only then fails with
//! [`CallError::AtCapacity`](crate::CallError::AtCapacity).
//!
//! A call made from inside another call (a tool asking the model through a
//! host import) must not wait for a slot its own caller may be holding: with
//! every slot held by such callers, all would wait for each other. Nested
//! calls take a slot if one is free and otherwise run on the pool's reserve,
//! the slots kept beyond the admitted count ([`reserve_for`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

tokio::task_local! {
    /// Set while the current task runs a call that holds a slot.
    static IN_CALL: ();
}

/// Pool slots kept beyond the admitted count for nested calls: an eighth,
/// at least 4. A slot is reserved address space, not memory.
pub fn reserve_for(admitted: u32) -> u32 {
    (admitted / 8).max(4)
}

/// Counts the instance slots calls hold and makes calls beyond them wait.
#[derive(Debug)]
pub struct InstanceSlots {
    permits: Arc<Semaphore>,
    capacity: usize,
    waiting: AtomicUsize,
    wait: Duration,
}

/// A held slot; dropping it lets the next waiting call in.
#[derive(Debug)]
pub struct Slot(Option<OwnedSemaphorePermit>);

impl Slot {
    /// Whether this nested call found no free slot and runs on the reserve.
    pub fn on_reserve(&self) -> bool {
        self.0.is_none()
    }
}

impl InstanceSlots {
    /// `capacity` calls at once; a call beyond them waits up to `wait`.
    pub fn new(capacity: u32, wait: Duration) -> Self {
        let capacity = capacity as usize;
        Self {
            permits: Arc::new(Semaphore::new(capacity)),
            capacity,
            waiting: AtomicUsize::new(0),
            wait,
        }
    }

    /// How long a call waits for a slot before it fails.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// Calls admitted at once.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Slots held by running calls.
    pub fn in_use(&self) -> usize {
        self.capacity - self.permits.available_permits()
    }

    /// Calls waiting for a slot.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Takes a slot, waiting in line (first come, first served) while all are
    /// held. `Err` carries how long it waited in vain. A call nested in
    /// another never waits (see the module docs).
    pub async fn admit(&self) -> Result<Slot, Duration> {
        if IN_CALL.try_with(|_| ()).is_ok() {
            return Ok(Slot(self.permits.clone().try_acquire_owned().ok()));
        }
        if let Ok(p) = self.permits.clone().try_acquire_owned() {
            return Ok(Slot(Some(p)));
        }
        // Counted until this future ends or is dropped (a cancelled call).
        let _waiting = Waiting::count(&self.waiting);
        let got = tokio::time::timeout(self.wait, self.permits.clone().acquire_owned()).await;
        match got {
            Ok(Ok(p)) => Ok(Slot(Some(p))),
            // The semaphore is never closed; treat it like a timeout anyway.
            Ok(Err(_)) | Err(_) => Err(self.wait),
        }
    }

    /// Runs `fut` marked as inside a call, so calls it makes do not wait.
    pub async fn in_call<F: Future>(fut: F) -> F::Output {
        IN_CALL.scope((), fut).await
    }

    /// `fut`, marked as inside a call when the current task is: for work a
    /// call hands to a task of its own, which would otherwise wait for the
    /// slot its caller holds. Call it where the task is spawned.
    pub fn inherit<F: Future>(fut: F) -> impl Future<Output = F::Output> {
        let inside = IN_CALL.try_with(|_| ()).is_ok();
        async move {
            if inside {
                IN_CALL.scope((), fut).await
            } else {
                fut.await
            }
        }
    }
}

/// One waiting call, counted while it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn count(n: &'a AtomicUsize) -> Self {
        n.fetch_add(1, Ordering::Relaxed);
        Self(n)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_beyond_capacity_waits_for_a_slot_to_free() {
        let slots = Arc::new(InstanceSlots::new(1, Duration::from_secs(10)));
        let first = slots.admit().await.unwrap();
        assert_eq!(slots.in_use(), 1);
        let s = slots.clone();
        let second = tokio::spawn(async move { s.admit().await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(slots.waiting(), 1, "the second call waits");
        drop(first);
        second.await.unwrap().unwrap();
        assert_eq!(slots.waiting(), 0);
    }

    #[tokio::test]
    async fn a_call_that_waits_too_long_fails_with_the_wait() {
        let slots = InstanceSlots::new(1, Duration::from_millis(50));
        let _held = slots.admit().await.unwrap();
        assert_eq!(slots.admit().await.unwrap_err(), Duration::from_millis(50));
        assert_eq!(slots.waiting(), 0);
    }

    #[tokio::test]
    async fn a_call_given_up_while_waiting_is_no_longer_counted() {
        let slots = InstanceSlots::new(1, Duration::from_secs(30));
        let _held = slots.admit().await.unwrap();
        let gave_up = tokio::time::timeout(Duration::from_millis(30), slots.admit()).await;
        assert!(gave_up.is_err());
        assert_eq!(slots.waiting(), 0);
    }

    #[tokio::test]
    async fn a_nested_call_never_waits() {
        let slots = InstanceSlots::new(1, Duration::from_secs(30));
        let _outer = slots.admit().await.unwrap();
        let started = std::time::Instant::now();
        let inner = InstanceSlots::in_call(slots.admit()).await.unwrap();
        assert!(
            inner.on_reserve(),
            "no slot was free: it runs on the reserve"
        );
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[tokio::test]
    async fn spawned_work_inherits_being_inside_a_call() {
        let slots = Arc::new(InstanceSlots::new(1, Duration::from_secs(30)));
        let _outer = slots.admit().await.unwrap();
        let s = slots.clone();
        let inner = InstanceSlots::in_call(async move {
            tokio::spawn(InstanceSlots::inherit(async move { s.admit().await }))
                .await
                .unwrap()
        })
        .await
        .unwrap();
        assert!(inner.on_reserve(), "the spawned call did not wait");
        // Outside any call, inherit changes nothing: the call waits.
        let s = slots.clone();
        let waited = tokio::time::timeout(
            Duration::from_millis(50),
            tokio::spawn(InstanceSlots::inherit(async move {
                s.admit().await.map(|_| ())
            })),
        )
        .await;
        assert!(waited.is_err(), "a call outside waits for the slot");
    }

    #[test]
    fn the_reserve_is_an_eighth_and_at_least_four() {
        assert_eq!(reserve_for(1024), 128);
        assert_eq!(reserve_for(2), 4);
    }
}
