//! A child's piped standard streams, as async streams on a worker's reactor.
//!
//! Each pipe end becomes a [`File`] (std's pipe types read and write only through `&mut`,
//! a `File` also through `&`, which is what [`Async`] hands an operation), made
//! non-blocking and registered on first use like a socket.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::io::Async;

/// How much [`poll_drain`] reads at a time: the default pipe capacity on Linux.
const DRAIN_CHUNK: usize = 64 * 1024;

/// The most reads [`poll_drain`] makes in one poll before it yields: a child that writes as
/// fast as we read must not hold the worker (and an enclosing timeout) in one poll.
const DRAIN_READS_PER_POLL: usize = 16;

macro_rules! read_pipe {
    ($(#[$doc:meta])* $name:ident, $std:ty) => {
        $(#[$doc])*
        pub struct $name {
            io: Async<File>,
        }

        impl $name {
            pub(super) fn new(std: $std) -> io::Result<Self> {
                Ok($name {
                    io: Async::new(File::from(OwnedFd::from(std)))?,
                })
            }

            /// Deregisters the pipe and gives its fd back, in blocking mode again: ready to
            /// be another child's stdin (`Stdio::from(fd)`), which expects a blocking one.
            ///
            /// # Errors
            ///
            /// An error if the poller's `epoll_ctl` or `fcntl` fails.
            pub fn into_owned_fd(self) -> io::Result<OwnedFd> {
                let fd = OwnedFd::from(self.io.into_inner()?);
                socket2::SockRef::from(&fd).set_nonblocking(false)?;
                Ok(fd)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name)).field("fd", &self.as_raw_fd()).finish()
            }
        }

        impl AsFd for $name {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.io.get_ref().as_fd()
            }
        }

        impl AsRawFd for $name {
            fn as_raw_fd(&self) -> RawFd {
                self.io.get_ref().as_raw_fd()
            }
        }

        impl futures_io::AsyncRead for $name {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut [u8],
            ) -> Poll<io::Result<usize>> {
                self.io.poll_read_with(cx, |mut f| f.read(buf))
            }
        }
    };
}

read_pipe!(
    /// The read end of a child's stdout: `futures-io`'s `AsyncRead`.
    ChildStdout,
    std::process::ChildStdout
);

read_pipe!(
    /// The read end of a child's stderr: `futures-io`'s `AsyncRead`.
    ChildStderr,
    std::process::ChildStderr
);

/// The write end of a child's stdin: `futures-io`'s `AsyncWrite`. Closing it (`close`, or
/// dropping it) is the child's end of input.
pub struct ChildStdin {
    /// `None` once closed.
    io: Option<Async<File>>,
}

impl ChildStdin {
    pub(super) fn new(std: std::process::ChildStdin) -> io::Result<Self> {
        Ok(ChildStdin {
            io: Some(Async::new(File::from(OwnedFd::from(std)))?),
        })
    }

    fn open(&self) -> io::Result<&Async<File>> {
        self.io.as_ref().ok_or_else(|| {
            io::Error::new(io::ErrorKind::BrokenPipe, "the child's stdin was closed")
        })
    }
}

impl fmt::Debug for ChildStdin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fd = self.io.as_ref().map(|io| io.get_ref().as_raw_fd());
        f.debug_struct("ChildStdin").field("fd", &fd).finish()
    }
}

impl futures_io::AsyncWrite for ChildStdin {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.open()?.poll_write_with(cx, |mut f| f.write(buf))
    }

    /// A pipe has no buffer of ours to flush.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.open().map(drop).into()
    }

    /// Closes the write end: the child reads end of input. Later writes fail with
    /// `BrokenPipe`; closing again does nothing.
    fn poll_close(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        drop(self.io.take());
        Poll::Ready(Ok(()))
    }
}

/// Reads `pipe` into `into` until its end (the pipe is then dropped, set to `None`) or until
/// it would block. Ready once the pipe is gone (or was never there).
pub(super) fn poll_drain<P>(
    pipe: &mut Option<P>,
    into: &mut Vec<u8>,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>>
where
    P: futures_io::AsyncRead + Unpin,
{
    for _ in 0..DRAIN_READS_PER_POLL {
        let Some(p) = pipe else {
            return Poll::Ready(Ok(()));
        };
        let len = into.len();
        into.resize(len + DRAIN_CHUNK, 0);
        let read = Pin::new(p).poll_read(cx, &mut into[len..]);
        let n = match &read {
            Poll::Ready(Ok(n)) => *n,
            _ => 0,
        };
        into.truncate(len + n);
        match read {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Ok(0)) => *pipe = None,
            Poll::Ready(Ok(_)) => {}
            Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
        }
    }
    if pipe.is_none() {
        return Poll::Ready(Ok(()));
    }
    // More to read: let the worker run others first, and come back.
    cx.waker().wake_by_ref();
    Poll::Pending
}
