//! One task drives a pooled HTTP/1.1 connection and pumps the body of the
//! response being read on it into the guest's read-ahead queue.
//!
//! hyper hands an HTTP/1 body over one frame at a time: the connection task
//! decodes a chunk, then waits until the body's reader has taken it. With the
//! connection and the pump in two tasks, every SSE frame of a model stream
//! costs two task wake-ups. Polling both in one task moves a run of frames per
//! wake-up instead: the connection decodes a chunk, the pump queues it, and
//! the loop goes on until the socket has nothing more or the queue is full.

use super::readahead::{self, Feed, Item};
use futures::future::BoxFuture;
use http_body::Body;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;
use tokio_util::sync::PollSender;
use wasmtime_wasi_http::WasiBody;

/// Most rounds (a frame moved or the connection progressed) in one poll
/// before the task lets others run. 64 moved the same frames per second but
/// let the first streams of a 100-turn burst delay the others' first content
/// (serve bench p99 282–364 ms at 64, 233–282 ms at 16). 4 made the 1,000-stream
/// section 20 % slower with 55 MB more peak RSS (docs/server.md).
const ROUNDS_PER_POLL: usize = 16;

/// A response body to pump into a guest's queue. Dropped unclaimed (the
/// driver ended as it was sent), it is pumped by a task of its own, so the
/// guest still sees the body's frames or its error.
struct PumpJob(Option<(WasiBody, Feed)>);

impl Drop for PumpJob {
    fn drop(&mut self) {
        if let Some((body, feed)) = self.0.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(readahead::pump(body, feed));
        }
    }
}

/// Hands the bodies of a connection's responses to its driver.
#[derive(Clone, Debug)]
pub(crate) struct Jobs(mpsc::UnboundedSender<PumpJob>);

impl std::fmt::Debug for PumpJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PumpJob").finish_non_exhaustive()
    }
}

impl Jobs {
    /// The body a guest reads for `body`: pumped by the connection's driver,
    /// or by a task of its own once the driver has ended.
    pub(crate) fn read_ahead(&self, body: WasiBody) -> WasiBody {
        let (feed, out) = readahead::queue();
        // A send to an ended driver drops the job, which pumps it itself.
        let _ = self.0.send(PumpJob(Some((body, feed))));
        out
    }
}

/// Spawns the task that drives `conn` and pumps its response bodies.
pub(crate) fn spawn(conn: impl Future<Output = hyper::Result<()>> + Send + 'static) -> Jobs {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(Driver {
        conn: Some(Box::pin(conn)),
        jobs: rx,
        pump: None,
    });
    Jobs(tx)
}

/// What one step of a pump did.
enum Step {
    /// A frame went into the queue.
    Moved,
    /// The body ended, or the guest dropped it.
    Done,
    /// Nothing to do until a waker fires.
    Waiting,
}

struct Pump {
    body: WasiBody,
    feed: Feed,
    tx: PollSender<Item>,
    /// Resolves when the guest drops its end, so an idle stream the guest gave
    /// up on is dropped (closing the connection) without waiting for a frame.
    closed: BoxFuture<'static, ()>,
}

impl Pump {
    fn new(mut job: PumpJob) -> Option<Self> {
        let (body, feed) = job.0.take()?;
        let watch = feed.sender().clone();
        Some(Self {
            body,
            tx: PollSender::new(feed.sender().clone()),
            feed,
            closed: Box::pin(async move { watch.closed().await }),
        })
    }

    /// Goes on in a task of its own.
    fn detach(self) {
        tokio::spawn(readahead::pump(self.body, self.feed));
    }

    fn step(&mut self, cx: &mut Context<'_>) -> Step {
        // A full queue leaves the rest in the socket; a guest that gives up
        // on it still ends the pump.
        if self.feed.level().poll_room(cx).is_pending() {
            return match self.closed.as_mut().poll(cx) {
                Poll::Ready(()) => Step::Done,
                Poll::Pending => Step::Waiting,
            };
        }
        match self.tx.poll_reserve(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(_)) => return Step::Done,
            Poll::Pending => return Step::Waiting,
        }
        match Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Ready(Some(polled)) => {
                let item = self.feed.account(Item::from(polled));
                let last = item.is_err();
                if self.tx.send_item(item).is_err() || last {
                    Step::Done
                } else {
                    Step::Moved
                }
            }
            Poll::Ready(None) => Step::Done,
            Poll::Pending => {
                self.tx.abort_send();
                match self.closed.as_mut().poll(cx) {
                    Poll::Ready(()) => Step::Done,
                    Poll::Pending => Step::Waiting,
                }
            }
        }
    }
}

struct Driver {
    conn: Option<BoxFuture<'static, hyper::Result<()>>>,
    jobs: mpsc::UnboundedReceiver<PumpJob>,
    pump: Option<Pump>,
}

impl Future for Driver {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        for _ in 0..ROUNDS_PER_POLL {
            // A new response means the last one is off the wire (hyper
            // frees the connection once it has decoded a body's end), but its
            // guest may not have read the end yet: that pump goes on in a
            // task of its own rather than hold up the new body. (A body with
            // more than the queue's bytes unread is not off the wire: its
            // connection stays busy until the guest reads, and the pool
            // opens another meanwhile.)
            if let Poll::Ready(Some(job)) = this.jobs.poll_recv(cx) {
                if let Some(old) = this.pump.take() {
                    old.detach();
                }
                this.pump = Pump::new(job);
            }
            let mut progressed = false;
            if let Some(pump) = &mut this.pump {
                match pump.step(cx) {
                    Step::Moved => progressed = true,
                    Step::Done => {
                        this.pump = None;
                        progressed = true;
                    }
                    Step::Waiting => {}
                }
            }
            if let Some(conn) = &mut this.conn
                && let Poll::Ready(result) = conn.as_mut().poll(cx)
            {
                if let Err(e) = result {
                    tracing::debug!("HTTP/1.1 connection ended: {e}");
                }
                this.conn = None;
                progressed = true;
            }
            if this.conn.is_none() && this.pump.is_none() {
                // Bodies sent to a connection that has ended still get read
                // (to their error): dropping a job pumps it in a task of its own.
                this.jobs.close();
                while this.jobs.try_recv().is_ok() {}
                return Poll::Ready(());
            }
            if !progressed {
                return Poll::Pending;
            }
        }
        // Used its share: let other tasks run, then carry on.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::{BodyExt, Empty};
    use hyper::client::conn::http1;
    use hyper_util::rt::TokioIo;
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// Reads one request head off `sock`.
    async fn read_head(sock: &mut TcpStream) {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(sock.read(&mut byte).await.expect("read"), 1, "request head");
            head.push(byte[0]);
        }
    }

    /// Asserts that the client closes its connection within 5 s, without
    /// waiting for another frame from the server.
    async fn assert_client_closes(server: &mut TcpStream) {
        let mut rest = [0u8; 16];
        let n = tokio::time::timeout(Duration::from_secs(5), server.read(&mut rest))
            .await
            .expect("the client closes the connection without waiting for a frame")
            .expect("read");
        assert_eq!(n, 0, "EOF from the client");
    }

    /// A client connection to `listener`, driven by a [`Driver`].
    async fn connect(listener: &TcpListener) -> (http1::SendRequest<WasiBody>, Jobs, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().expect("addr"));
        let (client, accepted) = tokio::join!(client, listener.accept());
        let (sender, conn) = http1::handshake(TokioIo::new(client.expect("connect")))
            .await
            .expect("handshake");
        (sender, spawn(conn), accepted.expect("accept").0)
    }

    fn get() -> http::Request<WasiBody> {
        http::Request::get("/")
            .header("host", "x")
            .body(Empty::<Bytes>::new().map_err(|e| match e {}).boxed_unsync())
            .expect("request")
    }

    async fn send(sender: &mut http1::SendRequest<WasiBody>, jobs: &Jobs) -> WasiBody {
        let res = sender.send_request(get()).await.expect("response");
        jobs.read_ahead(res.into_body().map_err(Into::into).boxed_unsync())
    }

    #[tokio::test]
    async fn a_stream_of_many_chunks_arrives_whole_and_the_connection_serves_again() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let (mut sender, jobs, mut server) = connect(&listener).await;
        let chunks: Vec<String> = (0..2_000).map(|i| format!("data: {i}\n\n")).collect();
        let serve = {
            let chunks = chunks.clone();
            async move {
                for _ in 0..2 {
                    read_head(&mut server).await;
                    server
                        .write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                        .await
                        .expect("head");
                    for c in &chunks {
                        let frame = format!("{:x}\r\n{c}\r\n", c.len());
                        server.write_all(frame.as_bytes()).await.expect("chunk");
                    }
                    server.write_all(b"0\r\n\r\n").await.expect("end");
                }
                server
            }
        };
        let read = async {
            let mut got = Vec::new();
            for _ in 0..2 {
                let body = send(&mut sender, &jobs).await;
                got.push(body.collect().await.expect("body").to_bytes());
                sender.ready().await.expect("the connection is reusable");
            }
            got
        };
        let (_server, got) = tokio::join!(serve, read);
        let want = chunks.concat();
        for body in got {
            assert_eq!(body, want.as_bytes());
        }
    }

    #[tokio::test]
    async fn the_next_response_does_not_wait_for_the_guest_to_read_the_last_one() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let (mut sender, jobs, mut server) = connect(&listener).await;
        // Exactly a full queue of frames: all of them leave hyper, which then
        // decodes the end and frees the connection, while the pump still
        // waits for room to see that end.
        let first: String = (0..readahead::QUEUE_FRAMES)
            .map(|i| format!("{:x}\r\n{:03}\r\n", 3, i % 1000))
            .collect();
        let serve = async move {
            read_head(&mut server).await;
            let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
            let response = format!("{head}{first}0\r\n\r\n");
            server.write_all(response.as_bytes()).await.expect("first");
            read_head(&mut server).await;
            let response = format!("{head}6\r\nsecond\r\n0\r\n\r\n");
            server.write_all(response.as_bytes()).await.expect("second");
            server
        };
        let client = async {
            let unread = send(&mut sender, &jobs).await;
            tokio::time::timeout(Duration::from_secs(5), sender.ready())
                .await
                .expect("hyper frees the connection at the first body's end")
                .expect("ready");
            let second = send(&mut sender, &jobs).await;
            let second = tokio::time::timeout(Duration::from_secs(5), second.collect())
                .await
                .expect("the second body is not held up by the unread first")
                .expect("body")
                .to_bytes();
            let first = unread.collect().await.expect("body").to_bytes();
            (first, second)
        };
        let (_server, (first, second)) = tokio::join!(serve, client);
        assert_eq!(second, "second");
        let want: String = (0..readahead::QUEUE_FRAMES)
            .map(|i| format!("{:03}", i % 1000))
            .collect();
        assert_eq!(
            first,
            want.as_bytes(),
            "the first body arrives whole after all"
        );
    }

    #[tokio::test]
    async fn what_the_guest_has_not_read_stays_in_the_socket_and_arrives_whole() {
        // Small kernel buffers at both ends (accepted sockets inherit the
        // listener's), so what the server manages to write shows what the
        // host has pulled off the socket.
        let kernel = 64 * 1024;
        let listen = tokio::net::TcpSocket::new_v4().expect("socket");
        listen.set_send_buffer_size(kernel).expect("sndbuf");
        listen
            .bind("127.0.0.1:0".parse().expect("addr"))
            .expect("bind");
        let listener = listen.listen(1).expect("listen");
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(kernel).expect("rcvbuf");
        let client = socket.connect(listener.local_addr().expect("addr"));
        let (client, accepted) = tokio::join!(client, listener.accept());
        let (mut sender, conn) = http1::handshake(TokioIo::new(client.expect("connect")))
            .await
            .expect("handshake");
        let jobs = spawn(conn);
        let mut server = accepted.expect("accept").0;
        // 64 KiB chunks: the old frame bound alone let 256 of them (16 MiB)
        // pile up in the host.
        const CHUNK: usize = 64 * 1024;
        const CHUNKS: usize = 512;
        let written = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let writer = {
            let written = written.clone();
            async move {
                read_head(&mut server).await;
                server
                    .write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                    .await
                    .expect("head");
                let mut frame = format!("{CHUNK:x}\r\n").into_bytes();
                frame.extend(std::iter::repeat_n(b'x', CHUNK));
                frame.extend_from_slice(b"\r\n");
                for _ in 0..CHUNKS {
                    server.write_all(&frame).await.expect("chunk");
                    written.fetch_add(CHUNK, std::sync::atomic::Ordering::SeqCst);
                }
                server.write_all(b"0\r\n\r\n").await.expect("end");
                server
            }
        };
        let writer = tokio::spawn(writer);
        let body = send(&mut sender, &jobs).await;
        // Wait until the server cannot write any more.
        let mut last = usize::MAX;
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = written.load(std::sync::atomic::Ordering::SeqCst);
            if now == last {
                break;
            }
            last = now;
        }
        assert!(
            last < 4 * 1024 * 1024,
            "the server wrote {last} bytes the guest did not read"
        );
        let got = tokio::time::timeout(Duration::from_secs(30), body.collect())
            .await
            .expect("the rest follows as the guest reads")
            .expect("body")
            .to_bytes();
        assert_eq!(got.len(), CHUNK * CHUNKS);
        assert!(got.iter().all(|&b| b == b'x'));
        writer.await.expect("writer");
    }

    #[tokio::test]
    async fn a_body_the_guest_drops_on_an_idle_stream_closes_the_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let (mut sender, jobs, mut server) = connect(&listener).await;
        let serve = async move {
            read_head(&mut server).await;
            server
                .write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n")
                .await
                .expect("head");
            server
        };
        let (mut server, mut body) = tokio::join!(serve, send(&mut sender, &jobs));
        let first = body.frame().await.expect("a frame").expect("data");
        assert_eq!(first.into_data().expect("data"), "hello");
        // The stream goes quiet; the guest gives up on it.
        drop(body);
        assert_client_closes(&mut server).await;
        assert!(sender.is_closed() || sender.ready().await.is_err());
    }

    #[tokio::test]
    async fn a_body_the_guest_drops_on_a_full_queue_closes_the_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let (mut sender, jobs, mut server) = connect(&listener).await;
        let serve = async move {
            read_head(&mut server).await;
            let mut response = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
            // Twice the queue's bytes, and the body does not end.
            for _ in 0..2 * readahead::QUEUE_BYTES / 1024 {
                response.extend_from_slice(b"400\r\n");
                response.extend(std::iter::repeat_n(b'x', 1024));
                response.extend_from_slice(b"\r\n");
            }
            server.write_all(&response).await.expect("response");
            server
        };
        let (mut server, body) = tokio::join!(serve, send(&mut sender, &jobs));
        // Let the driver fill the queue, then give up without reading.
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(body);
        assert_client_closes(&mut server).await;
    }

    #[tokio::test]
    async fn a_body_handed_over_after_the_connection_ended_is_still_read() {
        let (tx, rx) = mpsc::unbounded_channel();
        drop(rx);
        let jobs = Jobs(tx);
        let inner = http_body_util::Full::new(Bytes::from_static(b"still here"))
            .map_err(|e| match e {})
            .boxed_unsync();
        let body = jobs.read_ahead(inner);
        assert_eq!(body.collect().await.expect("body").to_bytes(), "still here");
    }
}
