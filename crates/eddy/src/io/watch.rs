//! asyncio's `add_reader` / `remove_reader` / `add_writer` / `remove_writer`.
//!
//! A watched fd is registered level-triggered with the poller of the worker it was first
//! added on (later calls for the same fd go to the same worker): while the fd is readable
//! (writable), its callback is queued once per loop cycle, exactly as asyncio's selector
//! loop does. Re-adding replaces the callback; one reader and one writer per fd.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::panic::Location;
use std::sync::Arc;

use crate::context;
use crate::contextvar;
use crate::reactor::{Direction, FdCallback};
use crate::worker::shared::Shared;

/// Wraps a persistent callback so that every call runs in the context captured now.
fn in_context<F: Fn() + Send + Sync + 'static>(callback: F) -> FdCallback {
    let ctx = contextvar::capture();
    Arc::new(move || contextvar::run_in(&ctx, &callback))
}

fn current() -> io::Result<Arc<Shared>> {
    context::current_shared().ok_or_else(|| {
        io::Error::other("no eddy runtime on this thread: add_reader/add_writer need a runtime")
    })
}

fn watch(
    fd: RawFd,
    dir: Direction,
    cb: FdCallback,
    loc: &'static Location<'static>,
) -> io::Result<()> {
    let shared = current()?;
    let _serial = shared.fd_watch_lock.lock();
    let worker = shared
        .workers
        .iter()
        .position(|w| w.reactor.is_watching(fd))
        .unwrap_or_else(|| crate::worker::schedule::home_worker(&shared));
    let slot = &shared.workers[worker];
    slot.reactor.watch(&slot.poller, worker, fd, dir, cb, loc)
}

fn unwatch(fd: RawFd, dir: Direction) -> io::Result<bool> {
    let shared = current()?;
    let _serial = shared.fd_watch_lock.lock();
    for w in shared.workers.iter() {
        if w.reactor.is_watching(fd) {
            return w.reactor.unwatch(&w.poller, fd, dir);
        }
    }
    Ok(false)
}

/// Calls `callback` (on a worker) every loop cycle while `fd` is readable, until
/// [`remove_reader`] is called. Adding a reader for an fd that has one replaces it.
///
/// The fd must stay open until `remove_reader`: close it first and the callback silently
/// stops (and a new fd with the same number would not be watched).
///
/// # Errors
///
/// An error outside an eddy runtime, or when the poller refuses the fd (for example an fd
/// already registered through [`Async`](crate::io::Async)).
///
/// # Examples
///
/// ```
/// use std::io::Write;
/// use std::os::fd::AsRawFd;
/// use std::os::unix::net::UnixStream;
///
/// let rt = eddy::Runtime::new()?;
/// let (a, mut b) = UnixStream::pair()?;
/// let (tx, rx) = std::sync::mpsc::channel();
/// let fd = a.as_raw_fd();
/// rt.block_on(async move {
///     eddy::add_reader(fd, move || { let _ = tx.send(()); })
/// })?;
/// b.write_all(b"x")?;
/// rx.recv().unwrap();
/// assert!(rt.block_on(async move { eddy::remove_reader(fd) })?);
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn add_reader<F>(fd: impl AsRawFd, callback: F) -> io::Result<()>
where
    F: Fn() + Send + Sync + 'static,
{
    watch(
        fd.as_raw_fd(),
        Direction::Read,
        in_context(callback),
        Location::caller(),
    )
}

/// Stops watching `fd` for reading. Returns whether a reader was registered.
///
/// # Errors
///
/// An error outside an eddy runtime, or if the poller fails to update the registration.
pub fn remove_reader(fd: impl AsRawFd) -> io::Result<bool> {
    unwatch(fd.as_raw_fd(), Direction::Read)
}

/// Calls `callback` (on a worker) every loop cycle while `fd` is writable, until
/// [`remove_writer`] is called. Adding a writer for an fd that has one replaces it.
///
/// # Errors
///
/// As [`add_reader`].
///
/// # Examples
///
/// ```
/// use std::os::fd::AsRawFd;
/// use std::os::unix::net::UnixStream;
///
/// let rt = eddy::Runtime::new()?;
/// let (a, _b) = UnixStream::pair()?;
/// let (tx, rx) = std::sync::mpsc::channel();
/// let fd = a.as_raw_fd();
/// rt.block_on(async move { eddy::add_writer(fd, move || { let _ = tx.send(()); }) })?;
/// rx.recv().unwrap(); // a fresh socket is writable
/// assert!(rt.block_on(async move { eddy::remove_writer(fd) })?);
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn add_writer<F>(fd: impl AsRawFd, callback: F) -> io::Result<()>
where
    F: Fn() + Send + Sync + 'static,
{
    watch(
        fd.as_raw_fd(),
        Direction::Write,
        in_context(callback),
        Location::caller(),
    )
}

/// Stops watching `fd` for writing. Returns whether a writer was registered.
///
/// # Errors
///
/// As [`remove_reader`].
pub fn remove_writer(fd: impl AsRawFd) -> io::Result<bool> {
    unwatch(fd.as_raw_fd(), Direction::Write)
}
