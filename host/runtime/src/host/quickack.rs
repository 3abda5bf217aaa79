//! A TCP stream that acknowledges what it reads at once.
//!
//! A model server that streams many small writes without `TCP_NODELAY`
//! (Nagle's algorithm on) holds each write until the previous one is
//! acknowledged. On a kept-alive connection Linux delays our ACKs by up to
//! 40 ms, so every such stream stalls on the ACK timer: the engine benchmark
//! measured 45 ms per turn against such a server once connections were
//! pooled, 0.4 ms on a fresh connection.
//!
//! What delays the ACKs is the kernel's "ping-pong" (interactive) mode: a
//! socket enters it when it transmits data soon after receiving some (a
//! request written on a kept-alive connection), or when the peer's FIN
//! arrives (no data follows that), and while in it, it holds ACKs for the
//! delayed-ACK timer. Setting `TCP_QUICKACK` leaves that mode and sends a
//! pending ACK. Outside it, Linux acknowledges a small segment as soon as a
//! read empties the receive queue.
//!
//! On an HTTP/1.1 connection a response starts only after the whole request
//! was sent, so nothing is transmitted while it streams: the flag is set on
//! the first read that returns data after each write, once per request (a
//! 500-token stream made 24 `setsockopt` calls per turn when it was set on
//! every read, about 8 % of the server's system calls in a burst). An HTTP/2
//! connection carries other streams' request bodies, whose segments the
//! kernel may transmit at any time, so it is set on every read there
//! ([`QuickAck::ack_every_read`]).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A [`TcpStream`] that sets `TCP_QUICKACK` on the first read returning data
/// after each write (and after connecting), or on every such read.
pub(crate) struct QuickAck {
    tcp: TcpStream,
    /// Whether data was written since the flag was last set.
    wrote: bool,
    /// Set the flag on every read that returns data (HTTP/2).
    every_read: bool,
}

impl QuickAck {
    /// Wraps a connected stream.
    pub(crate) fn new(tcp: TcpStream) -> Self {
        Self {
            tcp,
            wrote: true,
            every_read: false,
        }
    }

    /// Sets the flag on every read from now on: for a connection whose
    /// sends may go out while a response streams (HTTP/2 multiplexing).
    pub(crate) fn ack_every_read(&mut self) {
        self.every_read = true;
    }

    fn note_written(&mut self, polled: &Poll<io::Result<usize>>) {
        if matches!(polled, Poll::Ready(Ok(n)) if *n > 0) {
            self.wrote = true;
        }
    }
}

impl AsyncRead for QuickAck {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.tcp).poll_read(cx, buf);
        if (self.wrote || self.every_read)
            && matches!(polled, Poll::Ready(Ok(())))
            && buf.filled().len() > before
        {
            quick_ack(&self.tcp);
            self.wrote = false;
        }
        polled
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn quick_ack(tcp: &TcpStream) {
    // Best effort: a failure only means the kernel's normal ACK timing.
    let _ = rustix::net::sockopt::set_tcp_quickack(tcp, true);
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn quick_ack(_tcp: &TcpStream) {}

impl AsyncWrite for QuickAck {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.tcp).poll_write(cx, buf);
        self.note_written(&polled);
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs);
        self.note_written(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// Whether the socket is out of ping-pong mode: Linux reports
    /// `TCP_QUICKACK` as exactly that.
    fn quick(s: &QuickAck) -> bool {
        rustix::net::sockopt::tcp_quickack(&s.tcp).expect("getsockopt TCP_QUICKACK")
    }

    /// Puts the socket in ping-pong mode, as a request written soon after
    /// a response does on its own (whether it does depends on timing and
    /// on the kernel's `tcp_pingpong_thresh`, so the test does not rely on
    /// it).
    fn enter_ping_pong(s: &QuickAck) {
        rustix::net::sockopt::set_tcp_quickack(&s.tcp, false).expect("setsockopt");
        assert!(!quick(s), "the socket did not enter ping-pong mode");
    }

    /// A loopback server (Nagle on, as on the servers this is for) that
    /// answers each 3-byte request with 40 small writes and a `!`, and
    /// stays open until the client closes: a FIN would put the client in
    /// ping-pong mode too (`tcp_fin`), which is not what is tested.
    async fn chatty_server(rounds: usize) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.expect("accept");
            let mut req = [0u8; 3];
            for _ in 0..rounds {
                sock.read_exact(&mut req).await.expect("request");
                for i in 0..40u8 {
                    sock.write_all(&[b'a' + i % 26; 20]).await.expect("chunk");
                    tokio::task::yield_now().await;
                }
                sock.write_all(b"!").await.expect("end");
            }
            let mut rest = Vec::new();
            sock.read_to_end(&mut rest).await.expect("until closed");
        });
        (addr, server)
    }

    /// The first read after a write leaves ping-pong mode, and reads with no
    /// write in between never enter it again, so one call per request keeps
    /// the response acknowledged at once.
    #[tokio::test]
    async fn the_first_read_after_a_write_leaves_delayed_ack_mode_for_the_whole_response() {
        let (addr, server) = chatty_server(3).await;
        let mut client = QuickAck::new(TcpStream::connect(addr).await.expect("connect"));
        let mut buf = [0u8; 64];
        for round in 0..3 {
            client.write_all(b"req").await.expect("request");
            assert!(client.wrote, "round {round}: a write arms the next read");
            enter_ping_pong(&client);
            let mut reads = 0;
            loop {
                let n = client.read(&mut buf).await.expect("read");
                assert!(n > 0, "round {round}: the server closed early");
                reads += 1;
                assert!(!client.wrote, "round {round}: one read disarms it");
                assert!(
                    quick(&client),
                    "round {round}, read {reads}: still in delayed-ACK mode"
                );
                if buf[..n].ends_with(b"!") {
                    break;
                }
            }
        }
        drop(client);
        server.await.expect("server");
    }

    /// In every-read mode (HTTP/2) a read leaves ping-pong mode even with no
    /// write of ours before it: another stream's upload may have entered it.
    #[tokio::test]
    async fn every_read_mode_leaves_delayed_ack_mode_without_a_write() {
        let (addr, server) = chatty_server(1).await;
        let mut client = QuickAck::new(TcpStream::connect(addr).await.expect("connect"));
        client.ack_every_read();
        client.write_all(b"req").await.expect("request");
        let mut buf = [0u8; 64];
        let mut reads = 0;
        loop {
            // As if bytes of another stream had just gone out.
            enter_ping_pong(&client);
            let n = client.read(&mut buf).await.expect("read");
            assert!(n > 0, "the server closed early");
            reads += 1;
            assert!(quick(&client), "read {reads}: still in delayed-ACK mode");
            if buf[..n].ends_with(b"!") {
                break;
            }
        }
        drop(client);
        server.await.expect("server");
    }
}
