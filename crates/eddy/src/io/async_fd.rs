//! [`Async<T>`]: an fd registered with a worker's reactor.

use std::fmt;
use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{ready, Context, Poll};

use parking_lot::Mutex;

use crate::context;
use crate::reactor::{Direction, Source};
use crate::worker::shared::Shared;

/// An IO object registered with the reactor of an eddy worker.
///
/// Creating it puts the fd in non-blocking mode. Its first operation registers it
/// (edge-triggered) with the poller of the worker running that operation (a `block_on`
/// thread uses a worker chosen round-robin), so its readiness events are harvested by that
/// worker's loop, or by a sibling if that worker is stuck. Dropping it deregisters the fd
/// before the inner object closes it.
///
/// # Examples
///
/// ```
/// use std::os::unix::net::UnixStream;
/// use eddy::io::Async;
///
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let (a, b) = UnixStream::pair()?;
///     let (a, b) = (Async::new(a)?, Async::new(b)?);
///     b.write_with(|s| std::io::Write::write(&mut &*s, b"ping")).await?;
///     let mut buf = [0u8; 4];
///     let n = a.read_with(|s| std::io::Read::read(&mut &*s, &mut buf)).await?;
///     assert_eq!(&buf[..n], b"ping");
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Async<T: AsFd> {
    /// Set by the first operation (see `source`).
    source: OnceLock<Arc<Source>>,
    /// Serialises that first registration between the two halves of a split stream.
    registering: Mutex<()>,
    shared: Arc<Shared>,
    io: Option<T>,
}

impl<T: AsFd> fmt::Debug for Async<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Async")
            .field("fd", &self.as_raw_fd())
            .field("worker", &self.source.get().map(|s| s.worker))
            .finish()
    }
}

impl<T: AsFd> Async<T> {
    /// Puts `io` in non-blocking mode and ties it to the current runtime.
    ///
    /// The fd is registered with a poller lazily, by its first operation, on the worker that
    /// runs that operation: a connection accepted on one worker and handled by a task that a
    /// sibling stole is then served by that sibling's loop, so task and IO stay together.
    ///
    /// # Errors
    ///
    /// An error if this thread belongs to no eddy runtime, or if `fcntl` fails. Errors of the
    /// registration itself (`epoll_ctl`) come from the first operation.
    pub fn new(io: T) -> io::Result<Async<T>> {
        set_nonblocking(io.as_fd())?;
        Self::register(io)
    }

    /// Registers `io`, which must already be in non-blocking mode, with the current worker's
    /// reactor (asyncio's `sock_*` functions demand this of their sockets).
    ///
    /// # Errors
    ///
    /// `InvalidInput` "the socket must be non-blocking" for a blocking fd, and the errors of
    /// [`Async::new`].
    pub fn new_nonblocking(io: T) -> io::Result<Async<T>> {
        if !is_nonblocking(io.as_fd())? {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the socket must be non-blocking",
            ));
        }
        Self::register(io)
    }

    fn register(io: T) -> io::Result<Async<T>> {
        let shared = context::current_shared().ok_or_else(|| {
            io::Error::other(
                "no eddy runtime on this thread: IO objects must be created inside a runtime",
            )
        })?;
        Ok(Async {
            source: OnceLock::new(),
            registering: Mutex::new(()),
            shared,
            io: Some(io),
        })
    }

    /// The registration, made on first use with the poller of the worker that uses it (a
    /// worker chosen round-robin for other threads).
    fn source(&self) -> io::Result<&Arc<Source>> {
        if let Some(s) = self.source.get() {
            return Ok(s);
        }
        let _one_at_a_time = self.registering.lock();
        if let Some(s) = self.source.get() {
            return Ok(s);
        }
        let worker = crate::worker::schedule::home_worker(&self.shared);
        let slot = &self.shared.workers[worker];
        let source = slot
            .reactor
            .register(&slot.poller, worker, self.get_ref().as_fd())?;
        Ok(self.source.get_or_init(|| source))
    }

    /// The inner IO object.
    pub fn get_ref(&self) -> &T {
        self.io.as_ref().expect("io present until drop")
    }

    /// Deregisters the fd and gives the inner IO object back (still non-blocking).
    ///
    /// # Errors
    ///
    /// An error if the poller's `epoll_ctl` fails.
    pub fn into_inner(mut self) -> io::Result<T> {
        let res = self.deregister();
        let io = self.io.take().expect("io present until drop");
        res.map(|()| io)
    }

    fn deregister(&self) -> io::Result<()> {
        match self.source.get() {
            Some(source) => {
                let slot = &self.shared.workers[source.worker];
                slot.reactor.deregister(&slot.poller, source)
            }
            None => Ok(()),
        }
    }

    /// Waits until the fd is readable (or was, and no operation has since said otherwise).
    pub async fn readable(&self) -> io::Result<()> {
        poll_fn(|cx| self.poll_readable(cx)).await
    }

    /// Waits until the fd is writable (or was, and no operation has since said otherwise).
    pub async fn writable(&self) -> io::Result<()> {
        poll_fn(|cx| self.poll_writable(cx)).await
    }

    /// Waits for a non-blocking `connect` on this socket to finish, and returns its result.
    pub(crate) async fn connected(&self) -> io::Result<()> {
        self.source()?.unset_initial_ready(Direction::Write);
        self.writable().await?;
        match socket2::SockRef::from(&self.get_ref().as_fd()).take_error()? {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Poll form of [`readable`](Async::readable).
    pub fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.source()?
            .poll_ready(Direction::Read, cx)
            .map(|_| Ok(()))
    }

    /// Poll form of [`writable`](Async::writable).
    pub fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.source()?
            .poll_ready(Direction::Write, cx)
            .map(|_| Ok(()))
    }

    /// Runs the non-blocking read-side operation `op` until it does not return
    /// `WouldBlock`, waiting for readiness in between.
    pub async fn read_with<R>(&self, mut op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        poll_fn(|cx| self.poll_with(Direction::Read, cx, &mut op)).await
    }

    /// Runs the non-blocking write-side operation `op` until it does not return
    /// `WouldBlock`, waiting for readiness in between.
    pub async fn write_with<R>(&self, mut op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        poll_fn(|cx| self.poll_with(Direction::Write, cx, &mut op)).await
    }

    /// Runs `op` once if the fd is ready in `dir`, never waiting and registering no waker:
    /// `WouldBlock` when it is not. A `WouldBlock` from `op` forgets the readiness it acted
    /// on (unless an event arrived meanwhile), so that a later wait sleeps until the next
    /// edge. Results, short ones included, clear nothing.
    pub(crate) fn try_io<R>(
        &self,
        dir: Direction,
        op: &mut impl FnMut(&T) -> io::Result<R>,
    ) -> io::Result<R> {
        let source = self.source()?;
        let Some(event) = source.ready_now(dir) else {
            return Err(io::ErrorKind::WouldBlock.into());
        };
        let result = op(self.get_ref());
        if matches!(&result, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            source.clear_ready(dir, event);
        }
        result
    }

    /// Poll form of [`read_with`](Async::read_with).
    pub fn poll_read_with<R>(
        &self,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&T) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.poll_with(Direction::Read, cx, &mut op)
    }

    /// Poll form of [`write_with`](Async::write_with).
    pub fn poll_write_with<R>(
        &self,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&T) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.poll_with(Direction::Write, cx, &mut op)
    }

    /// A stream read or write of `len` bytes: as `poll_with`, and a short transfer
    /// (`0 < n < len`) forgets the readiness it acted on when the next attempt would only
    /// return `WouldBlock`, saving that system call:
    ///
    /// * a short write means the send buffer is full; the edge raised when it drains (or an
    ///   error) moves the tick, so it is not lost;
    /// * a short read means the receive buffer is empty, unless the peer closed: the source
    ///   decides (no FIN seen, every event since the last `WouldBlock` carried `EPOLLRDHUP`;
    ///   see `reactor::source`). On a request/response connection that is one read fewer per
    ///   request.
    pub(crate) fn poll_stream(
        &self,
        dir: Direction,
        cx: &mut Context<'_>,
        len: usize,
        op: &mut impl FnMut(&T) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        let source = self.source()?;
        loop {
            let event = ready!(source.poll_ready(dir, cx));
            match op(self.get_ref()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    source.clear_ready(dir, event);
                }
                Ok(n) if n > 0 && n < len => {
                    source.clear_after_short(dir, event);
                    return Poll::Ready(Ok(n));
                }
                res => return Poll::Ready(res),
            }
        }
    }

    fn poll_with<R>(
        &self,
        dir: Direction,
        cx: &mut Context<'_>,
        op: &mut impl FnMut(&T) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        let source = self.source()?;
        loop {
            let event = ready!(source.poll_ready(dir, cx));
            match op(self.get_ref()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    source.clear_ready(dir, event);
                }
                res => return Poll::Ready(res),
            }
        }
    }
}

impl<T: AsFd> AsFd for Async<T> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.get_ref().as_fd()
    }
}

impl<T: AsFd> AsRawFd for Async<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.get_ref().as_fd().as_raw_fd()
    }
}

impl<T: AsFd> Drop for Async<T> {
    fn drop(&mut self) {
        if self.io.is_some() {
            // Deregister before `io` (and its fd) is dropped.
            let _ = self.deregister();
        }
    }
}

impl<T: AsFd> futures_io::AsyncRead for Async<T>
where
    for<'a> &'a T: Read,
{
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_read_with(cx, |mut io| io.read(buf))
    }
}

impl<T: AsFd> futures_io::AsyncWrite for Async<T>
where
    for<'a> &'a T: Write,
{
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_with(cx, |mut io| io.write(buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_write_with(cx, |mut io| io.flush())
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

pub(crate) fn is_nonblocking(fd: BorrowedFd<'_>) -> io::Result<bool> {
    socket2::SockRef::from(&fd).nonblocking()
}

pub(crate) fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    socket2::SockRef::from(&fd).set_nonblocking(true)
}
