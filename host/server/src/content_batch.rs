//! Batching of a workstream's content tokens into `content` events: at most
//! one event per window, and no token waits longer than the window.
//!
//! A model streams hundreds of tokens per reply; one SSE event each would
//! cost every subscriber a frame per token. The wire contract batches them
//! in a 25 ms window. The batch is a throttle with both edges: a token that
//! arrives when no content went out within the window goes out at once (the
//! first token of a reply is never held), later ones wait until the window
//! since the last event has passed, and the workstream's pump flushes a
//! waiting batch at that moment even when no further token comes (a model
//! pausing mid-sentence does not leave its last words unsent).

use std::time::{Duration, Instant};

/// Content tokens go out at most once per this window (the original's).
pub const WINDOW: Duration = Duration::from_millis(25);
/// A batch of this many bytes or more goes out at once, window or not.
pub const MAX_BYTES: usize = 4096;

/// Content waiting for its window.
#[derive(Debug, Default)]
pub struct ContentBatch {
    text: String,
    /// When the last content event went out.
    sent: Option<Instant>,
}

impl ContentBatch {
    /// Adds `text` arriving at `now`; returns what should go out now (the
    /// whole batch), if anything.
    pub fn push(&mut self, text: &str, now: Instant) -> Option<String> {
        self.text.push_str(text);
        let window_passed = self
            .sent
            .is_none_or(|sent| now.saturating_duration_since(sent) >= WINDOW);
        if window_passed || self.text.len() >= MAX_BYTES {
            self.take(now)
        } else {
            None
        }
    }

    /// Everything waiting, to go out at `now` (before another event, at a
    /// turn's end, or when [`Self::due`] has come).
    pub fn take(&mut self, now: Instant) -> Option<String> {
        if self.text.is_empty() {
            return None;
        }
        self.sent = Some(now);
        Some(std::mem::take(&mut self.text))
    }

    /// When the waiting batch must go out, if one is waiting.
    pub fn due(&self) -> Option<Instant> {
        if self.text.is_empty() {
            return None;
        }
        // Text waits only while a window is open, so `sent` is set; a batch
        // without one is due at once.
        Some(self.sent.map_or_else(Instant::now, |sent| sent + WINDOW))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_first_token_goes_out_at_once_and_later_ones_wait_for_the_window() {
        let t0 = Instant::now();
        let mut b = ContentBatch::default();
        assert_eq!(b.due(), None);
        assert_eq!(b.push("Hel", t0).as_deref(), Some("Hel"));
        assert_eq!(b.due(), None, "nothing waits after it went out");
        assert_eq!(b.push("lo", t0 + ms(5)), None);
        assert_eq!(b.push(", ", t0 + ms(10)), None);
        assert_eq!(
            b.due(),
            Some(t0 + WINDOW),
            "due one window after the last event"
        );
        assert_eq!(
            b.push("world", t0 + ms(25)).as_deref(),
            Some("lo, world"),
            "a token at the window's end takes the waiting ones with it"
        );
        assert_eq!(b.due(), None);
    }

    #[test]
    fn a_waiting_batch_is_due_when_the_window_ends_even_if_no_token_follows() {
        let t0 = Instant::now();
        let mut b = ContentBatch::default();
        assert!(b.push("a", t0).is_some());
        assert_eq!(b.push("b", t0 + ms(3)), None);
        let due = b.due().expect("b waits");
        assert_eq!(due, t0 + WINDOW);
        // The pump's timer fires at `due`.
        assert_eq!(b.take(due).as_deref(), Some("b"));
        // The next token's window counts from that event.
        assert_eq!(b.push("c", due + ms(10)), None);
        assert_eq!(b.due(), Some(due + WINDOW));
    }

    #[test]
    fn a_token_after_a_quiet_spell_goes_out_at_once() {
        let t0 = Instant::now();
        let mut b = ContentBatch::default();
        assert!(b.push("a", t0).is_some());
        assert_eq!(b.push("b", t0 + ms(400)).as_deref(), Some("b"));
    }

    #[test]
    fn a_long_batch_goes_out_inside_the_window() {
        let t0 = Instant::now();
        let mut b = ContentBatch::default();
        assert!(b.push("a", t0).is_some());
        let half = "x".repeat(MAX_BYTES / 2);
        assert_eq!(b.push(&half, t0 + ms(1)), None);
        let out = b.push(&half, t0 + ms(2)).expect("the cap sends it");
        assert_eq!(out.len(), MAX_BYTES);
    }

    #[test]
    fn taking_an_empty_batch_sends_nothing_and_keeps_the_window() {
        let t0 = Instant::now();
        let mut b = ContentBatch::default();
        assert_eq!(b.take(t0), None);
        assert!(b.push("a", t0).is_some());
        // Another event flushed nothing: the window still counts from "a".
        assert_eq!(b.take(t0 + ms(20)), None);
        assert_eq!(b.push("b", t0 + ms(21)), None);
        assert_eq!(b.due(), Some(t0 + WINDOW));
    }
}
