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

/// One frame (or the error that ends the body).
pub(crate) type Item = Result<Frame<Bytes>, HttpError>;

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
        if tx.send(frame).await.is_err() {
            break;
        }
    }
}

struct Merging {
    rx: mpsc::Receiver<Item>,
    /// A non-data frame (or error) that arrived while merging data.
    held: Option<Item>,
}

impl Body for Merging {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        if let Some(item) = self.held.take() {
            return Poll::Ready(Some(item));
        }
        let first = match self.rx.poll_recv(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            other => return other,
        };
        let data = match first.into_data() {
            Ok(d) => d,
            Err(frame) => return Poll::Ready(Some(Ok(frame))),
        };
        let mut merged: Option<BytesMut> = None;
        let mut len = data.len();
        while len < MAX_MERGED {
            match self.rx.try_recv() {
                Ok(Ok(frame)) => match frame.into_data() {
                    Ok(more) => {
                        len += more.len();
                        merged
                            .get_or_insert_with(|| BytesMut::from(&data[..]))
                            .extend_from_slice(&more);
                    }
                    Err(frame) => {
                        self.held = Some(Ok(frame));
                        break;
                    }
                },
                Ok(Err(e)) => {
                    self.held = Some(Err(e));
                    break;
                }
                Err(_) => break,
            }
        }
        let out = merged.map_or(data, BytesMut::freeze);
        Poll::Ready(Some(Ok(Frame::data(out))))
    }
}
