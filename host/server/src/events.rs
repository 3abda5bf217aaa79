//! Per-workstream event hub: numbered SSE events in a bounded ring, so a client
//! that reconnects with `Last-Event-ID` gets exactly what it missed (or an
//! honest `replay_truncated` when the ring no longer covers the gap).

use axum::body::Bytes;
use std::collections::VecDeque;
use std::sync::Mutex;
use tokio::sync::broadcast;

/// Events kept for replay when nothing is configured.
pub const DEFAULT_RING: usize = 2000;

/// One numbered event, serialised once and shared by every subscriber.
#[derive(Debug, Clone)]
pub struct Numbered {
    /// Monotonic id within the workstream.
    pub id: u64,
    /// The whole SSE frame, `id: <id>\ndata: <json>\n\n`, written once when
    /// the event is published: every subscriber sends these bytes as they
    /// are (a reference count, not a copy per subscriber).
    frame: Bytes,
}

/// Bytes of a frame after its JSON: the blank line that ends an SSE event.
const FRAME_END: &str = "\n\n";

impl Numbered {
    /// The event numbered `id` whose JSON is `json`.
    pub fn new(id: u64, json: &str) -> Self {
        use std::fmt::Write as _;
        // Sized exactly: the ring keeps the frame, so no slack is held.
        let mut frame = String::with_capacity(json_start(id) + json.len() + FRAME_END.len());
        let _ = write!(frame, "id: {id}\ndata: ");
        frame.push_str(json);
        frame.push_str(FRAME_END);
        Self {
            id,
            frame: Bytes::from(frame),
        }
    }

    /// The event's JSON.
    pub fn json(&self) -> &str {
        // The frame was built from a `str` with an ASCII prefix and suffix,
        // so the slice between them is that `str`: the check cannot fail.
        let start = json_start(self.id);
        let end = self.frame.len().saturating_sub(FRAME_END.len());
        self.frame
            .get(start..end)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or_default()
    }

    /// The SSE frame as it goes out: `id:` line, `data:` line, blank line.
    pub fn frame(&self) -> Bytes {
        self.frame.clone()
    }
}

/// Where the JSON starts in the frame of event `id`: after `id: <id>\ndata: `.
fn json_start(id: u64) -> usize {
    "id: \ndata: ".len() + decimal_digits(id)
}

/// How many decimal digits `n` is written with.
fn decimal_digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// What a new subscriber gets besides the live receiver.
#[derive(Debug)]
pub enum Replay {
    /// No cursor, or one past every event published (ids from another
    /// history): the caller sends the connect preamble.
    Fresh {
        /// The newest event's id when the receiver was made (0: none yet).
        newest: u64,
    },
    /// Everything after the cursor, in order.
    Ok(Vec<Numbered>),
    /// The ring no longer holds the events after the cursor.
    Truncated {
        /// Events that cannot be replayed.
        lost_count: u64,
        /// The newest event's id when the receiver was made.
        newest: u64,
    },
}

impl Replay {
    /// The id up to which a subscriber has everything once it has sent this
    /// replay (and the preamble, if any), given the cursor it asked with:
    /// live events at or below it are already covered. Read under the same
    /// lock as the receiver was made, so no event falls between the two.
    pub fn covers_through(&self, cursor: Option<u64>) -> u64 {
        match self {
            Replay::Fresh { newest } | Replay::Truncated { newest, .. } => *newest,
            Replay::Ok(_) => cursor.unwrap_or(0),
        }
    }
}

/// What a lagging subscriber gets from the ring ([`EventHub::catch_up`]).
#[derive(Debug)]
pub struct CatchUp {
    /// Events after the cursor that the ring no longer holds (0: none).
    pub lost: u64,
    /// The ring's events after the cursor, in order: with `lost` > 0 they
    /// start right after the lost ones.
    pub events: Vec<Numbered>,
}

/// Slots of the live channel. It only has to absorb what is published
/// between two polls of a subscriber; one that falls further behind resyncs
/// from the ring, losing nothing the ring still holds. Each workstream
/// someone watches holds these slots: 256 were about 12 KiB, 32 are 1.5 KiB.
const LIVE_SLOTS: usize = 32;

/// How far behind a subscriber may fall without losing events, whatever the
/// ring's size: the live channel and the ring together cover at least this
/// much. With a ring this long or longer the ring covers it, so the channel
/// can be short; a shorter ring (`[server] event_ring` may be as small as 16)
/// keeps a channel this long, as every ring had before.
const LAG_COVERED: usize = 256;

/// The live channel's slots for a ring of `ring` events.
fn live_slots(ring: usize) -> usize {
    if ring >= LAG_COVERED {
        LIVE_SLOTS
    } else {
        LAG_COVERED
    }
}

struct Inner {
    next_id: u64,
    ring: VecDeque<Numbered>,
    cap: usize,
    /// The live channel, while anyone listens. Its slots are allocated up
    /// front, so a workstream nobody watches (loaded for a channel, a
    /// sub-agent, or after its clients left) holds none.
    tx: Option<broadcast::Sender<Numbered>>,
}

/// The hub of one workstream.
pub struct EventHub {
    inner: Mutex<Inner>,
}

impl EventHub {
    /// A hub whose ids start after `seed` (e.g. the newest stored event id).
    pub fn new(cap: usize, seed: u64) -> Self {
        Self {
            inner: Mutex::new(Inner {
                next_id: seed + 1,
                // Grows with use: most workstreams never fill their ring.
                ring: VecDeque::new(),
                cap: cap.max(1),
                tx: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Numbers `event`, keeps it for replay and sends it to live subscribers.
    pub fn publish(&self, event: &impl serde::Serialize) -> u64 {
        let json = turnstone_protocol::wire::to_json(event);
        let mut g = self.lock();
        let id = g.next_id;
        g.next_id += 1;
        let n = Numbered::new(id, &json);
        if g.ring.len() == g.cap {
            g.ring.pop_front();
        }
        g.ring.push_back(n.clone());
        // Sent under the lock so a concurrent subscribe sees each event exactly
        // once: either in its replay or on its receiver.
        if let Some(tx) = &g.tx
            && tx.send(n).is_err()
        {
            // The last subscriber left: free the slots until the next one.
            g.tx = None;
        }
        id
    }

    /// The id the next event will get.
    pub fn next_id(&self) -> u64 {
        self.lock().next_id
    }

    /// Subscribes; with a cursor, also returns the events after it.
    pub fn subscribe(&self, after: Option<u64>) -> (Replay, broadcast::Receiver<Numbered>) {
        let mut g = self.lock();
        let slots = live_slots(g.cap);
        let rx =
            g.tx.get_or_insert_with(|| broadcast::channel(slots).0)
                .subscribe();
        let newest = g.next_id.saturating_sub(1);
        let Some(after) = after.filter(|&after| after <= newest) else {
            return (Replay::Fresh { newest }, rx);
        };
        if after == newest {
            return (Replay::Ok(Vec::new()), rx);
        }
        let oldest = g.ring.front().map(|n| n.id).unwrap_or(g.next_id);
        if after + 1 < oldest {
            return (
                Replay::Truncated {
                    lost_count: oldest - after - 1,
                    newest,
                },
                rx,
            );
        }
        let events = g.ring.iter().filter(|n| n.id > after).cloned().collect();
        (Replay::Ok(events), rx)
    }

    /// What a subscriber whose live receiver lagged can still get after
    /// `after`: the ring's events, and how many before them it no longer
    /// holds. Read under one lock, so the count and the events meet exactly.
    pub fn catch_up(&self, after: u64) -> CatchUp {
        let g = self.lock();
        let oldest = g.ring.front().map(|n| n.id).unwrap_or(g.next_id);
        CatchUp {
            lost: oldest.saturating_sub(after + 1),
            events: g.ring.iter().filter(|n| n.id > after).cloned().collect(),
        }
    }

    /// Live subscribers.
    pub fn subscribers(&self) -> usize {
        self.lock()
            .tx
            .as_ref()
            .map_or(0, broadcast::Sender::receiver_count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn replay_covers_the_gap_or_says_how_much_was_lost() {
        let hub = EventHub::new(3, 10);
        for i in 0..5 {
            hub.publish(&json!({"type": "content", "text": i}));
        }
        // ids 11..=15; the ring holds 13, 14, 15.
        match hub.subscribe(Some(12)).0 {
            Replay::Ok(v) => assert_eq!(v.iter().map(|n| n.id).collect::<Vec<_>>(), [13, 14, 15]),
            other => panic!("{other:?}"),
        }
        match hub.subscribe(Some(10)).0 {
            Replay::Truncated { lost_count, newest } => assert_eq!((lost_count, newest), (2, 15)),
            other => panic!("{other:?}"),
        }
        match hub.subscribe(Some(15)).0 {
            Replay::Ok(v) => assert!(v.is_empty()),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            hub.subscribe(None).0,
            Replay::Fresh { newest: 15 }
        ));
        // A cursor past every event (another history's ids, or a forged
        // one) starts fresh rather than waiting for ids to catch up.
        for ahead in [16, u64::MAX] {
            match hub.subscribe(Some(ahead)).0 {
                r @ Replay::Fresh { newest: 15 } => assert_eq!(r.covers_through(Some(ahead)), 15),
                other => panic!("{ahead}: {other:?}"),
            }
        }
        assert_eq!(hub.subscribe(Some(12)).0.covers_through(Some(12)), 12);
    }

    #[test]
    fn a_numbered_event_is_one_frame_and_its_json_is_the_data_line() {
        for id in [1, 9, 10, 99, 100, 123_456_789, u64::MAX] {
            let json = r#"{"text":"a\nb é","type":"content"}"#;
            let n = Numbered::new(id, json);
            assert_eq!(n.json(), json, "id {id}");
            assert_eq!(n.frame().len(), json_start(id) + json.len() + 2, "id {id}");
            assert_eq!(
                &n.frame()[..],
                format!("id: {id}\ndata: {json}\n\n").as_bytes(),
                "id {id}"
            );
        }
    }

    #[tokio::test]
    async fn live_events_arrive_once_after_the_replay() {
        let hub = EventHub::new(10, 0);
        hub.publish(&json!({"n": 1}));
        let (replay, mut rx) = hub.subscribe(Some(0));
        hub.publish(&json!({"n": 2}));
        let Replay::Ok(v) = replay else { panic!() };
        assert_eq!(v.len(), 1);
        assert_eq!(rx.recv().await.unwrap().id, 2);
        assert!(rx.try_recv().is_err());
    }

    /// Everything `rx` holds now, in order; a lag is an error here.
    fn drain(rx: &mut broadcast::Receiver<Numbered>) -> Vec<u64> {
        let mut ids = Vec::new();
        loop {
            match rx.try_recv() {
                Ok(n) => ids.push(n.id),
                Err(broadcast::error::TryRecvError::Empty) => return ids,
                Err(e) => panic!("{e:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_subscriber_that_falls_behind_the_live_channel_resyncs_from_the_ring() {
        let hub = EventHub::new(DEFAULT_RING, 0);
        let (_, mut rx) = hub.subscribe(None);
        let sent = LIVE_SLOTS as u64 * 3;
        for i in 1..=sent {
            hub.publish(&json!({"n": i}));
        }
        // The receiver lost its place in the channel ...
        let Err(broadcast::error::RecvError::Lagged(_)) = rx.recv().await else {
            panic!("a receiver {sent} events behind a {LIVE_SLOTS}-slot channel lags");
        };
        // ... and what it missed comes from the ring, in order, complete.
        let CatchUp {
            lost,
            events: missed,
        } = hub.catch_up(0);
        assert_eq!(lost, 0, "the ring covers the gap");
        assert_eq!(
            missed.iter().map(|n| n.id).collect::<Vec<_>>(),
            (1..=sent).collect::<Vec<_>>()
        );
        assert_eq!(missed[0].json(), r#"{"n":1}"#);
        // The channel goes on with the newest events it kept, then what follows.
        let kept = drain(&mut rx);
        assert_eq!(kept.last(), Some(&sent));
        assert!(kept.len() <= LIVE_SLOTS);
        hub.publish(&json!({"n": sent + 1}));
        assert_eq!(drain(&mut rx), [sent + 1]);
    }

    #[tokio::test]
    async fn with_a_short_ring_the_channel_still_absorbs_what_it_used_to() {
        // A ring shorter than LAG_COVERED cannot resync a long lag, so its
        // channel keeps LAG_COVERED slots: a subscriber that far behind has
        // lost nothing.
        let hub = EventHub::new(16, 0);
        let (_, mut rx) = hub.subscribe(None);
        let sent = LAG_COVERED as u64;
        for i in 1..=sent {
            hub.publish(&json!({"n": i}));
        }
        assert_eq!(drain(&mut rx), (1..=sent).collect::<Vec<_>>());
        // The ring alone no longer covers it: a subscriber lost there is told
        // exactly how many events are gone and gets the rest.
        let CatchUp { lost, events } = hub.catch_up(0);
        assert_eq!(lost, sent - 16);
        assert_eq!(
            events.iter().map(|n| n.id).collect::<Vec<_>>(),
            (sent - 15..=sent).collect::<Vec<_>>()
        );
        assert_eq!(hub.catch_up(sent - 3).lost, 0);
        assert_eq!(hub.catch_up(sent - 3).events.len(), 3);
        assert_eq!(hub.catch_up(sent).events.len(), 0);
    }

    #[tokio::test]
    async fn the_live_channel_exists_only_while_someone_listens() {
        let hub = EventHub::new(10, 0);
        hub.publish(&json!({"n": 1}));
        assert!(hub.lock().tx.is_none(), "nobody subscribed yet");
        let (_, rx) = hub.subscribe(None);
        assert_eq!(hub.subscribers(), 1);
        drop(rx);
        hub.publish(&json!({"n": 2}));
        assert!(hub.lock().tx.is_none(), "freed once the last one left");
        assert_eq!(hub.subscribers(), 0);
        // A later subscriber replays what it missed and gets what follows.
        let (replay, mut rx) = hub.subscribe(Some(1));
        hub.publish(&json!({"n": 3}));
        let Replay::Ok(v) = replay else { panic!() };
        assert_eq!(v.iter().map(|n| n.id).collect::<Vec<_>>(), [2]);
        assert_eq!(rx.recv().await.unwrap().id, 3);
    }
}
