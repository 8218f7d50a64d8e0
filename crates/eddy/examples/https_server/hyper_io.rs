//! hyper's IO traits (`hyper::rt::Read`, `hyper::rt::Write`) over a `futures-io` stream.
//!
//! eddy implements hyper's traits for its own sockets, but a TLS stream is futures-rustls's
//! type, and the orphan rule keeps anyone but hyper or futures-rustls from implementing
//! hyper's traits for it: a wrapper is the only way, as hyper-util's `TokioIo` is for tokio.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use futures_io::{AsyncRead, AsyncWrite};

/// The most one read hands to hyper: a TLS record's largest plaintext, so a read returns
/// all that one record decrypted to.
const SCRATCH: usize = 16 * 1024;

/// A `futures-io` stream seen through hyper's IO traits.
#[derive(Debug)]
pub(crate) struct FuturesIo<T>(T);

impl<T> FuturesIo<T> {
    pub(crate) fn new(inner: T) -> FuturesIo<T> {
        FuturesIo(inner)
    }
}

impl<T: AsyncRead + Unpin> hyper::rt::Read for FuturesIo<T> {
    /// Reads into a zeroed buffer on the stack, then copies into hyper's: hyper's buffer may
    /// be uninitialised, and `futures-io` reads only into initialised bytes. Writing into it
    /// directly would take `unsafe`; the copy is small next to the decryption before it.
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let mut scratch = [0u8; SCRATCH];
        let len = buf.remaining().min(SCRATCH);
        let n = ready!(Pin::new(&mut self.0).poll_read(cx, &mut scratch[..len]))?;
        buf.put_slice(&scratch[..n]);
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> hyper::rt::Write for FuturesIo<T> {
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

    /// futures-rustls takes every slice of a vectored write into one TLS write, so hyper need
    /// not copy a response's head and body into one buffer first. (A stream that writes only
    /// the first slice would still be correct, in more calls.)
    fn is_write_vectored(&self) -> bool {
        true
    }

    /// Flushing matters here, unlike on a bare socket: futures-rustls may hold encrypted
    /// bytes until it is flushed.
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    /// For TLS: sends `close_notify`, then shuts the socket's write side, so the peer can
    /// tell the end of the stream from a cut connection.
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_close(cx)
    }
}
