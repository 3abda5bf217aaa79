//! Read-ahead for response bodies handed to guests. hyper delivers an HTTP/1
//! body one chunk per demand, so a guest reading a stream of tiny SSE chunks
//! would pay a cross-task round trip per chunk. A pump keeps pulling frames
//! into a bounded queue, and each guest read takes every data frame already
//! queued (up to 64 KiB) at once. The pump is either a task of its own
//! ([`read_ahead`]) or, for a pooled HTTP/1 connection, part of the task that
//! drives the connection (`h1_driver`), which saves a hand-off per frame.

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;
use wasmtime_wasi_http::{Error as HttpError, WasiBody};

/// Frames buffered ahead of the guest.
pub(crate) const QUEUE_FRAMES: usize = 256;
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
}

/// A bounded queue of frames: the pump's end, and the body the guest reads.
pub(crate) fn queue() -> (mpsc::Sender<Item>, WasiBody) {
    let (tx, rx) = mpsc::channel::<Item>(QUEUE_FRAMES);
    (tx, Merging { rx, held: None }.boxed_unsync())
}

/// Wraps `body` so it is read ahead by a task of its own.
pub fn read_ahead(body: WasiBody) -> WasiBody {
    let (tx, out) = queue();
    tokio::spawn(pump(body, tx));
    out
}

/// Moves `body`'s frames into `tx` until either ends.
pub(crate) async fn pump(mut body: WasiBody, tx: mpsc::Sender<Item>) {
    loop {
        // Stop as soon as the guest drops the body, even on an idle stream.
        let frame = tokio::select! {
            f = body.frame() => f,
            () = tx.closed() => break,
        };
        let Some(frame) = frame else { break };
        if tx.send(frame.into()).await.is_err() {
            break;
        }
    }
}

struct Merging {
    rx: mpsc::Receiver<Item>,
    /// A non-data frame (or error) that arrived while merging data.
    held: Option<Box<Polled>>,
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

    #[tokio::test]
    async fn data_is_merged_and_trailers_and_errors_keep_their_place() {
        let (tx, mut body) = queue();
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-done", http::HeaderValue::from_static("1"));
        for polled in [
            Ok(Frame::data(Bytes::from_static(b"ab"))),
            Ok(Frame::data(Bytes::from_static(b"cd"))),
            Ok(Frame::trailers(trailers)),
            Ok(Frame::data(Bytes::from_static(b"ef"))),
        ] {
            tx.send(Item::from(polled)).await.unwrap();
        }
        drop(tx);
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "abcd");
        let second = body.frame().await.unwrap().unwrap();
        assert_eq!(second.trailers_ref().unwrap()["x-done"], "1");
        let third = body.frame().await.unwrap().unwrap();
        assert_eq!(third.into_data().unwrap(), "ef");
        assert!(body.frame().await.is_none());
    }
}
