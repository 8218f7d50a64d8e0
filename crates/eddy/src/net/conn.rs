//! What TCP and Unix stream sockets share: a connection over an `Async<S>`, its async read
//! and write methods, its owned halves, and the `futures-io` (and, with the `tokio-io`
//! feature, tokio) trait impls. The public types in `tcp` and `unix` are thin wrappers.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::io::Async;
use crate::reactor::Direction;

/// The std socket types a [`Conn`] can hold.
pub(crate) trait StreamSocket: AsFd + Send + Sync + 'static
where
    for<'a> &'a Self: Read + Write,
{
    fn shutdown_std(&self, how: Shutdown) -> io::Result<()>;
}

impl StreamSocket for std::net::TcpStream {
    fn shutdown_std(&self, how: Shutdown) -> io::Result<()> {
        self.shutdown(how)
    }
}

impl StreamSocket for std::os::unix::net::UnixStream {
    fn shutdown_std(&self, how: Shutdown) -> io::Result<()> {
        self.shutdown(how)
    }
}

/// A registered stream socket, shared by a stream and its owned halves.
#[derive(Debug)]
pub(crate) struct Conn<S: StreamSocket>(pub(crate) Arc<Async<S>>)
where
    for<'a> &'a S: Read + Write;

impl<S: StreamSocket> Clone for Conn<S>
where
    for<'a> &'a S: Read + Write,
{
    fn clone(&self) -> Self {
        Conn(self.0.clone())
    }
}

impl<S: StreamSocket> Conn<S>
where
    for<'a> &'a S: Read + Write,
{
    pub(crate) fn new(socket: S) -> io::Result<Self> {
        Ok(Conn(Arc::new(Async::new(socket)?)))
    }

    pub(crate) fn get_ref(&self) -> &S {
        self.0.get_ref()
    }

    pub(crate) async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_read(cx, buf)).await
    }

    pub(crate) async fn read_exact(&self, mut buf: &mut [u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read(buf).await? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => buf = &mut buf[n..],
            }
        }
        Ok(())
    }

    pub(crate) async fn write(&self, buf: &[u8]) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_write(cx, buf)).await
    }

    pub(crate) async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write(buf).await? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => buf = &buf[n..],
            }
        }
        Ok(())
    }

    pub(crate) fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.get_ref().shutdown_std(how)
    }

    pub(crate) fn poll_read(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let len = buf.len();
        self.0
            .poll_stream(Direction::Read, cx, len, &mut |mut s: &S| s.read(&mut *buf))
    }

    pub(crate) fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.0
            .poll_stream(Direction::Write, cx, buf.len(), &mut |mut s: &S| {
                s.write(buf)
            })
    }

    /// Writes some of `bufs` in one system call (`writev`); returns how much.
    #[cfg_attr(not(feature = "hyper"), allow(dead_code))]
    pub(crate) fn poll_write_vectored(
        &self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum();
        self.0
            .poll_stream(Direction::Write, cx, len, &mut |mut s: &S| {
                s.write_vectored(bufs)
            })
    }

    /// Runs `op` once if the socket is ready in `dir`, never waiting (`Async::try_io`):
    /// `WouldBlock` when it is not. A `WouldBlock` from `op` clears the readiness it acted
    /// on, tick-checked, so a later wait sleeps until the next edge and an edge that raced
    /// with `op` is kept. A short result clears nothing: the caller decides whether to try
    /// again.
    pub(crate) fn try_io<R>(
        &self,
        dir: Direction,
        mut op: impl FnMut(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        self.0.try_io(dir, &mut op)
    }

    pub(crate) fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.try_io(Direction::Read, |mut s: &S| s.read(buf))
    }

    pub(crate) fn try_read_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.try_io(Direction::Read, |mut s: &S| s.read_vectored(bufs))
    }

    pub(crate) fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.try_io(Direction::Write, |mut s: &S| s.write(buf))
    }

    pub(crate) fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.try_io(Direction::Write, |mut s: &S| s.write_vectored(bufs))
    }

    pub(crate) fn poll_shutdown(&self) -> Poll<io::Result<()>> {
        Poll::Ready(match self.shutdown(Shutdown::Write) {
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
            r => r,
        })
    }
}

/// The async read/write methods every stream type has; expands inside its `impl` block
/// (the type needs a `conn: Conn<_>` field).
macro_rules! stream_io_methods {
    () => {
        /// Reads into `buf`; `Ok(0)` means the peer closed its write side.
        ///
        /// # Errors
        ///
        /// The socket error, for example `ConnectionReset`.
        pub async fn read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.conn.read(buf).await
        }

        /// Reads exactly `buf.len()` bytes.
        ///
        /// # Errors
        ///
        /// `UnexpectedEof` if the peer closes first, or the socket error.
        pub async fn read_exact(&self, buf: &mut [u8]) -> std::io::Result<()> {
            self.conn.read_exact(buf).await
        }

        /// Writes some of `buf`; returns how much.
        ///
        /// # Errors
        ///
        /// The socket error, for example `BrokenPipe`.
        pub async fn write(&self, buf: &[u8]) -> std::io::Result<usize> {
            self.conn.write(buf).await
        }

        /// Writes all of `buf`.
        ///
        /// # Errors
        ///
        /// The socket error.
        pub async fn write_all(&self, buf: &[u8]) -> std::io::Result<()> {
            self.conn.write_all(buf).await
        }

        /// Shuts down the read side, the write side (sends FIN) or both.
        ///
        /// # Errors
        ///
        /// The `shutdown` error.
        pub fn shutdown(&self, how: std::net::Shutdown) -> std::io::Result<()> {
            self.conn.shutdown(how)
        }
    };
}

/// Implements the async read traits for `$ty` (and `&$ty`), whose `conn()` gives a `Conn`.
macro_rules! impl_async_read {
    ($ty:ty) => {
        $crate::net::conn::impl_async_read!(@futures $ty, &$ty);

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncRead for $ty {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let n = std::task::ready!(self.conn().poll_read(cx, buf.initialize_unfilled()))?;
                buf.advance(n);
                std::task::Poll::Ready(Ok(()))
            }
        }

        #[cfg(feature = "hyper")]
        impl hyper::rt::Read for $ty {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: hyper::rt::ReadBufCursor<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                $crate::hyper::poll_read_cursor(self.conn(), cx, buf)
            }
        }
    };
    (@futures $($t:ty),+) => {$(
        impl futures_io::AsyncRead for $t {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut [u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.conn().poll_read(cx, buf)
            }
        }
    )+};
}

/// Implements the async write traits for `$ty` (and `&$ty`), whose `conn()` gives a `Conn`.
/// Closing (`poll_close`, tokio's `poll_shutdown`) shuts the write side down (sends FIN).
macro_rules! impl_async_write {
    ($ty:ty) => {
        $crate::net::conn::impl_async_write!(@futures $ty, &$ty);

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncWrite for $ty {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.conn().poll_write(cx, buf)
            }
            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }
            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                self.conn().poll_shutdown()
            }
        }

        #[cfg(feature = "hyper")]
        impl hyper::rt::Write for $ty {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.conn().poll_write(cx, buf)
            }
            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.conn().poll_write_vectored(cx, bufs)
            }
            fn is_write_vectored(&self) -> bool {
                true
            }
            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }
            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                self.conn().poll_shutdown()
            }
        }
    };
    (@futures $($t:ty),+) => {$(
        impl futures_io::AsyncWrite for $t {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                self.conn().poll_write(cx, buf)
            }
            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }
            fn poll_close(
                self: std::pin::Pin<&mut Self>,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                self.conn().poll_shutdown()
            }
        }
    )+};
}

/// Defines the owned read and write halves of a stream type.
macro_rules! owned_halves {
    ($socket:ty, $stream:literal) => {
        /// The read half of a
        #[doc = $stream]
        /// made by `into_split`; it can move to another task than the write half.
        #[derive(Debug)]
        pub struct OwnedReadHalf {
            pub(crate) conn: crate::net::conn::Conn<$socket>,
        }

        /// The write half of a
        #[doc = $stream]
        /// made by `into_split`. Dropping it shuts the write side down (sends FIN), as
        /// tokio's does.
        #[derive(Debug)]
        pub struct OwnedWriteHalf {
            pub(crate) conn: crate::net::conn::Conn<$socket>,
        }

        impl OwnedReadHalf {
            fn conn(&self) -> &crate::net::conn::Conn<$socket> {
                &self.conn
            }

            /// Reads into `buf`; `Ok(0)` means the peer closed its write side.
            pub async fn read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
                self.conn.read(buf).await
            }
        }

        impl OwnedWriteHalf {
            fn conn(&self) -> &crate::net::conn::Conn<$socket> {
                &self.conn
            }

            /// Writes some of `buf`; returns how much.
            pub async fn write(&self, buf: &[u8]) -> std::io::Result<usize> {
                self.conn.write(buf).await
            }

            /// Writes all of `buf`.
            pub async fn write_all(&self, buf: &[u8]) -> std::io::Result<()> {
                self.conn.write_all(buf).await
            }

            /// Shuts the write side down (sends FIN) now.
            pub fn shutdown(&self) -> std::io::Result<()> {
                self.conn.shutdown(std::net::Shutdown::Write)
            }
        }

        impl Drop for OwnedWriteHalf {
            fn drop(&mut self) {
                let _ = self.conn.shutdown(std::net::Shutdown::Write);
            }
        }

        crate::net::conn::impl_async_read!(OwnedReadHalf);
        crate::net::conn::impl_async_write!(OwnedWriteHalf);
    };
}

pub(crate) use {impl_async_read, impl_async_write, owned_halves, stream_io_methods};
