//! A TCP stream that acknowledges what it reads at once.
//!
//! A model server that streams many small writes without `TCP_NODELAY`
//! (Nagle's algorithm on) holds each write until the previous one is
//! acknowledged. On a kept-alive connection Linux delays our ACKs by up to
//! 40 ms, so every such stream stalls on the ACK timer: the engine benchmark
//! measured 45 ms per turn against such a server once connections were
//! pooled, 0.4 ms on a fresh connection (which starts in quick-ACK mode).
//! Re-entering quick-ACK mode after each read sends the pending ACK at once.
//! The flag is not sticky in the kernel, hence once per read.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A [`TcpStream`] that sets `TCP_QUICKACK` after every read that returned data.
pub(crate) struct QuickAck(pub(crate) TcpStream);

impl AsyncRead for QuickAck {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.0).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            quick_ack(&self.0);
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
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
