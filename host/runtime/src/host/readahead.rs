//! Read-ahead for response bodies handed to guests. hyper delivers an HTTP/1
//! body one chunk per demand, so a guest reading a stream of tiny SSE chunks
//! would pay a cross-task round trip per chunk. A pump keeps pulling frames
//! into a bounded queue, and each guest read takes every data frame already
//! queued (up to 64 KiB) at once. The pump is either a task of its own
//! ([`read_ahead`]) or, for a pooled HTTP/1 connection, part of the task that
//! drives the connection (`h1_driver`), which saves a hand-off per frame.
//!
//! The queue is bounded in bytes as well as in frames: what the guest has not
//! read yet is better left in the socket's receive buffer (kernel memory,
//! with TCP's flow control pacing the server) than in the host's heap, where
//! every frame also keeps alive the read buffer it was cut from (the bound
//! counts the frames' bytes, not those buffers).

use bytes::{Bytes, BytesMut};
use futures::task::AtomicWaker;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use tokio::sync::mpsc;
use wasmtime_wasi_http::{Error as HttpError, WasiBody};

/// Frames buffered ahead of the guest.
pub(crate) const QUEUE_FRAMES: usize = 256;
/// Bytes of data buffered ahead of the guest: the pump waits while the queue
/// holds this much, so it holds at most this plus one frame (a frame is at
/// most one of hyper's reads, its read buffer being 400 KB at most). Twice
/// the guest SDK's read size (`http::CHUNK_BYTES`, 16 KiB): a guest read
/// takes everything queued, and the pump refills the queue while the guest
/// works through that.
pub(crate) const QUEUE_BYTES: usize = 32 * 1024;
/// Most bytes merged into one frame for the guest.
const MAX_MERGED: usize = 64 * 1024;

/// One frame as a body yields it (or the error that ends the body).
type Polled = Result<Frame<Bytes>, HttpError>;

/// One frame in the queue: a data frame is its bytes, anything else
/// (trailers, the body's error) is boxed. The queue allocates its slots 32
/// at a time, and a stream in flight holds at least one such block; with
/// the frame and the error inline a slot was over 96 bytes, now it is 32.
pub(crate) enum Item {
    /// A data frame.
    Data(Bytes),
    /// Trailers or the error, rare enough to allocate.
    Other(Box<Polled>),
}

impl From<Polled> for Item {
    fn from(polled: Polled) -> Self {
        match polled {
            Ok(frame) => match frame.into_data() {
                Ok(data) => Item::Data(data),
                Err(frame) => Item::Other(Box::new(Ok(frame))),
            },
            Err(e) => Item::Other(Box::new(Err(e))),
        }
    }
}

impl Item {
    /// Whether the body ends with this one (an error ends it).
    pub(crate) fn is_err(&self) -> bool {
        matches!(self, Item::Other(other) if other.is_err())
    }

    /// Bytes of data this item holds.
    fn data_len(&self) -> usize {
        match self {
            Item::Data(data) => data.len(),
            Item::Other(_) => 0,
        }
    }
}

/// The bytes a queue holds, shared by its two ends.
#[derive(Debug, Default)]
pub(crate) struct Level {
    bytes: AtomicUsize,
    /// The pump, when it waits for room.
    pump: AtomicWaker,
}

impl Level {
    /// Ready while the queue holds less than [`QUEUE_BYTES`]; otherwise the
    /// pump is woken once the guest has read it below that.
    pub(crate) fn poll_room(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.bytes.load(Ordering::Acquire) < QUEUE_BYTES {
            return Poll::Ready(());
        }
        self.pump.register(cx.waker());
        // The guest may have read in between: look again after registering.
        if self.bytes.load(Ordering::Acquire) < QUEUE_BYTES {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    fn added(&self, n: usize) {
        self.bytes.fetch_add(n, Ordering::AcqRel);
    }

    fn taken(&self, n: usize) {
        // Saturating: a count that wrapped below zero would read as a full
        // queue for good and stop the pump.
        let before = match self
            .bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
                Some(b.saturating_sub(n))
            }) {
            Ok(b) | Err(b) => b,
        };
        debug_assert!(before >= n, "{n} bytes taken, {before} queued");
        if before >= QUEUE_BYTES && before.saturating_sub(n) < QUEUE_BYTES {
            self.pump.wake();
        }
    }
}

/// The pump's end of a queue. Not `Clone`: the level has one waker slot,
/// for one pump.
#[derive(Debug)]
pub(crate) struct Feed {
    tx: mpsc::Sender<Item>,
    level: Arc<Level>,
}

impl Feed {
    /// The frame channel (for waiting on room for one more frame, or on
    /// the guest dropping its end).
    pub(crate) fn sender(&self) -> &mpsc::Sender<Item> {
        &self.tx
    }

    /// The queue's byte level.
    pub(crate) fn level(&self) -> &Level {
        &self.level
    }

    /// Accounts for `item` and turns it into what goes on the channel
    /// (call just before sending it).
    pub(crate) fn account(&self, item: Item) -> Item {
        self.level.added(item.data_len());
        item
    }
}

/// A bounded queue of frames: the pump's end, and the body the guest reads.
pub(crate) fn queue() -> (Feed, WasiBody) {
    let (tx, rx) = mpsc::channel::<Item>(QUEUE_FRAMES);
    let level = Arc::new(Level::default());
    let body = Merging {
        rx,
        held: None,
        level: level.clone(),
    };
    (Feed { tx, level }, body.boxed_unsync())
}

/// Wraps `body` so it is read ahead by a task of its own.
pub fn read_ahead(body: WasiBody) -> WasiBody {
    let (feed, out) = queue();
    tokio::spawn(pump(body, feed));
    out
}

/// Moves `body`'s frames into `feed` until either ends.
pub(crate) async fn pump(mut body: WasiBody, feed: Feed) {
    loop {
        // Stop as soon as the guest drops the body, even on an idle stream
        // or a full queue.
        let frame = tokio::select! {
            f = async {
                std::future::poll_fn(|cx| feed.level.poll_room(cx)).await;
                body.frame().await
            } => f,
            () = feed.tx.closed() => break,
        };
        let Some(frame) = frame else { break };
        if feed.tx.send(feed.account(frame.into())).await.is_err() {
            break;
        }
    }
}

struct Merging {
    rx: mpsc::Receiver<Item>,
    /// A non-data frame (or error) that arrived while merging data.
    held: Option<Box<Polled>>,
    level: Arc<Level>,
}

impl Body for Merging {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Polled>> {
        if let Some(other) = self.held.take() {
            return Poll::Ready(Some(*other));
        }
        let data = match self.rx.poll_recv(cx) {
            Poll::Ready(Some(Item::Data(data))) => data,
            Poll::Ready(Some(Item::Other(other))) => return Poll::Ready(Some(*other)),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        let mut merged: Option<BytesMut> = None;
        let mut len = data.len();
        while len < MAX_MERGED {
            match self.rx.try_recv() {
                Ok(Item::Data(more)) => {
                    len += more.len();
                    merged
                        .get_or_insert_with(|| BytesMut::from(&data[..]))
                        .extend_from_slice(&more);
                }
                Ok(Item::Other(other)) => {
                    self.held = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        self.level.taken(len);
        let out = merged.map_or(data, BytesMut::freeze);
        Poll::Ready(Some(Ok(Frame::data(out))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queued_frame_is_the_size_of_its_bytes_and_a_tag() {
        // Every stream in flight holds a block of 32 of these.
        assert!(std::mem::size_of::<Item>() <= std::mem::size_of::<Bytes>() + 8);
    }

    /// Sets its flag when dropped.
    struct DropFlag(Arc<std::sync::atomic::AtomicBool>);

    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// An endless body of 1 KiB frames, counting the frames pulled from it
    /// and flagging when it is dropped.
    fn endless(pulled: Arc<AtomicUsize>, dropped: Arc<std::sync::atomic::AtomicBool>) -> WasiBody {
        let flag = DropFlag(dropped);
        let frames = futures::stream::repeat_with(move || {
            let _keep = &flag;
            pulled.fetch_add(1, Ordering::SeqCst);
            Ok::<_, HttpError>(Frame::data(Bytes::from(vec![b'x'; 1024])))
        });
        http_body_util::StreamBody::new(frames).boxed_unsync()
    }

    /// Lets the pump run until it stops pulling.
    async fn settle(pulled: &AtomicUsize) -> usize {
        let mut last = usize::MAX;
        loop {
            for _ in 0..64 {
                tokio::task::yield_now().await;
            }
            let now = pulled.load(Ordering::SeqCst);
            if now == last {
                return now;
            }
            last = now;
        }
    }

    #[tokio::test]
    async fn the_pump_stops_once_the_queue_holds_its_bytes_and_goes_on_as_the_guest_reads() {
        let pulled = Arc::new(AtomicUsize::new(0));
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut body = read_ahead(endless(pulled.clone(), dropped.clone()));
        let full = QUEUE_BYTES / 1024;
        // The bound is in bytes, well below the frame bound.
        assert!(full < QUEUE_FRAMES);
        assert_eq!(
            settle(&pulled).await,
            full,
            "a full queue and not a frame more"
        );
        // One guest read takes everything queued, and the pump refills.
        let read = body.frame().await.expect("a frame").expect("data");
        assert_eq!(read.into_data().expect("data").len(), full * 1024);
        assert_eq!(settle(&pulled).await, 2 * full);
        // A guest that gives up on a full queue ends the pump, which drops
        // the source (closing its connection).
        assert!(!dropped.load(Ordering::SeqCst));
        drop(body);
        assert_eq!(settle(&pulled).await, 2 * full);
        assert!(
            dropped.load(Ordering::SeqCst),
            "the pump let go of the source"
        );
    }

    #[tokio::test]
    async fn data_is_merged_and_trailers_and_errors_keep_their_place() {
        let (feed, mut body) = queue();
        let tx = feed.sender();
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-done", http::HeaderValue::from_static("1"));
        for polled in [
            Ok(Frame::data(Bytes::from_static(b"ab"))),
            Ok(Frame::data(Bytes::from_static(b"cd"))),
            Ok(Frame::trailers(trailers)),
            Ok(Frame::data(Bytes::from_static(b"ef"))),
        ] {
            tx.send(feed.account(Item::from(polled))).await.unwrap();
        }
        drop(feed);
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "abcd");
        let second = body.frame().await.unwrap().unwrap();
        assert_eq!(second.trailers_ref().unwrap()["x-done"], "1");
        let third = body.frame().await.unwrap().unwrap();
        assert_eq!(third.into_data().unwrap(), "ef");
        assert!(body.frame().await.is_none());
    }
}
