//! The reactor: each worker's `polling::Poller` as its selector (phase 2 of `_run_once`).
//!
//! Every worker owns one [`Reactor`] beside its `Poller`. An IO source is registered with
//! the poller of the worker that first uses it (lazily, by its first operation), so its
//! events are harvested by that worker and the tasks they wake land in that worker's own
//! ready queue, where the task that uses the source most likely runs.
//!
//! Costs we design around (measured in the brief): one `Poller::wait` is five system calls
//! (about 1.3 µs even with a zero timeout), while `poll(2)` on the epoll fd with a zero
//! timeout is one system call (~0.3 µs) and consumes nothing. So:
//!
//! * a worker with no registered source never polls while it has work;
//! * a busy worker with sources first asks `poll(2)` whether its epoll fd is readable and
//!   only then harvests with `wait(Some(ZERO))`, taking every ready event at once;
//! * an idle worker harvests in the same `wait` it parks in;
//! * sources are edge-triggered (registered once, no re-arming `epoll_ctl` per event);
//!   `add_reader`/`add_writer` fds are level-triggered, as asyncio's selector loop is.
//!
//! **IO of a stuck worker.** If a worker is busy (not parked) and has not harvested for
//! [`STUCK_IO_GRACE`], a sibling checks its epoll fd with `poll(2)` and, if events are
//! waiting, harvests them itself with `wait(Some(ZERO))` and dispatches them: wakers run on
//! the sibling (so the woken tasks are queued, and run, there) and fd callbacks are queued
//! there. Three hazards of sharing a `Poller` (from the brief) are handled:
//!
//! 1. *One waiter per poller*: `wait` uses `try_lock`; if the owner is inside `wait` the
//!    sibling gets nothing and moves on. The sibling never blocks on another's poller.
//! 2. *Events go to whoever waits*: the sibling dispatches what it harvested through the
//!    owner's source table (shared, behind a mutex), so no event is lost.
//! 3. *A sibling's wait swallows the owner's pending `notify()`*: after serving, the sibling
//!    notifies the owner again; at worst the owner's next wait returns at once.

mod source;

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::panic::Location;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use polling::{Event, Events, PollMode, Poller};
use slab::Slab;

pub(crate) use source::{Direction, FdCallback, Fired, Source};

/// How long a busy worker may go without harvesting its IO before a sibling serves it.
pub(crate) const STUCK_IO_GRACE: Duration = Duration::from_millis(5);

/// One worker's IO registrations.
#[derive(Debug)]
pub(crate) struct Reactor {
    sources: Mutex<Slab<Arc<Source>>>,
    /// Number of registered sources; read without the lock on every busy cycle.
    count: AtomicUsize,
    /// fds watched with `add_reader`/`add_writer`.
    watched: Mutex<HashMap<RawFd, Arc<Source>>>,
    /// When the owner last harvested events (the timer heaps' nanosecond scale).
    last_poll: AtomicU64,
}

impl Reactor {
    pub(crate) fn new() -> Self {
        Reactor {
            sources: Mutex::new(Slab::new()),
            count: AtomicUsize::new(0),
            watched: Mutex::new(HashMap::new()),
            last_poll: AtomicU64::new(0),
        }
    }

    /// True if any source is registered: only then is there IO to poll for.
    #[inline]
    pub(crate) fn has_sources(&self) -> bool {
        self.count.load(Ordering::Relaxed) != 0
    }

    /// Registers `fd` (edge-triggered, both directions) with `poller`.
    pub(crate) fn register(
        &self,
        poller: &Poller,
        worker: usize,
        fd: BorrowedFd<'_>,
    ) -> io::Result<Arc<Source>> {
        self.register_with(poller, worker, fd.as_raw_fd(), Event::all, PollMode::Edge)
    }

    fn register_with(
        &self,
        poller: &Poller,
        worker: usize,
        fd: RawFd,
        interest: impl FnOnce(usize) -> Event,
        mode: PollMode,
    ) -> io::Result<Arc<Source>> {
        let source = {
            let mut sources = self.sources.lock();
            let entry = sources.vacant_entry();
            let source = Arc::new(Source::new(fd, entry.key(), worker));
            entry.insert(source.clone());
            source
        };
        // SAFETY: `add_with_mode` requires the fd to be deleted from the poller before it is
        // closed. Sources created by `Async` are deleted in `Async::drop`, before the IO
        // object (and its fd) is dropped. fds watched with `add_reader`/`add_writer` are the
        // caller's: the public functions document that the fd must be removed before it is
        // closed. On Linux (epoll) a violation cannot corrupt memory either: the kernel drops
        // closed fds from the interest list by itself and `polling` keeps no per-fd state.
        // (End of SAFETY.)
        let added = unsafe { poller.add_with_mode(fd, interest(source.key), mode) };
        if let Err(e) = added {
            self.sources.lock().remove(source.key);
            return Err(e);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        Ok(source)
    }

    /// Removes a source from `poller` and from the table.
    pub(crate) fn deregister(&self, poller: &Poller, source: &Source) -> io::Result<()> {
        // `Async::drop` runs before its IO object is dropped, and `remove_*` before the user
        // closes the fd (their documented contract).
        // SAFETY: so `source.fd` is still open here, for the duration of the borrow.
        let fd = unsafe { BorrowedFd::borrow_raw(source.fd) };
        let res = poller.delete(fd);
        if self.sources.lock().try_remove(source.key).is_some() {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
        source.wake_all();
        res
    }

    /// `add_reader`/`add_writer`: installs a persistent callback for `dir` on `fd`, replacing
    /// one that was there.
    pub(crate) fn watch(
        &self,
        poller: &Poller,
        worker: usize,
        fd: RawFd,
        dir: Direction,
        callback: FdCallback,
        location: &'static Location<'static>,
    ) -> io::Result<()> {
        let mut watched = self.watched.lock();
        let source = match watched.get(&fd) {
            Some(s) => s.clone(),
            None => {
                let s = self.register_with(poller, worker, fd, Event::none, PollMode::Level)?;
                watched.insert(fd, s.clone());
                s
            }
        };
        source.set_callback(dir, Some((callback, location)));
        Self::rearm(poller, &source)
    }

    /// Whether `fd` is watched with `add_reader`/`add_writer` here.
    pub(crate) fn is_watching(&self, fd: RawFd) -> bool {
        self.watched.lock().contains_key(&fd)
    }

    /// `remove_reader`/`remove_writer`: true if a callback was installed.
    pub(crate) fn unwatch(&self, poller: &Poller, fd: RawFd, dir: Direction) -> io::Result<bool> {
        let mut watched = self.watched.lock();
        let Some(source) = watched.get(&fd).cloned() else {
            return Ok(false);
        };
        let had = source.set_callback(dir, None);
        if !source.has_callback(Direction::Read) && !source.has_callback(Direction::Write) {
            watched.remove(&fd);
            self.deregister(poller, &source)?;
        } else {
            Self::rearm(poller, &source)?;
        }
        Ok(had)
    }

    fn rearm(poller: &Poller, source: &Source) -> io::Result<()> {
        let mut ev = Event::none(source.key);
        ev.readable = source.has_callback(Direction::Read);
        ev.writable = source.has_callback(Direction::Write);
        // SAFETY: the fd is registered (so open, per the contract above).
        let fd = unsafe { BorrowedFd::borrow_raw(source.fd) };
        poller.modify_with_mode(fd, ev, PollMode::Level)
    }

    /// One cheap system call: does the poller have anything to report? Consumes nothing.
    pub(crate) fn maybe_ready(poller: &Poller) -> bool {
        let mut pfd = libc::pollfd {
            fd: poller.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // A zero timeout makes the call return at once.
        // SAFETY: `pfd` is a valid, initialised pollfd array of length 1 during the call.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        n > 0
    }

    /// Marks that the owner harvested (or is about to block in a harvesting wait) at `now`.
    pub(crate) fn note_polled(&self, now_nanos: u64) {
        self.last_poll.store(now_nanos, Ordering::Relaxed);
    }

    /// When the owner last harvested.
    pub(crate) fn last_polled(&self) -> u64 {
        self.last_poll.load(Ordering::Relaxed)
    }

    /// Turns harvested events into wakers and callbacks (to be run by the caller).
    pub(crate) fn dispatch(&self, events: &Events, fired: &mut Fired) {
        if events.is_empty() {
            return;
        }
        let sources = self.sources.lock();
        for ev in events.iter() {
            if let Some(source) = sources.get(ev.key) {
                source.on_event(ev.readable, ev.writable, fired);
            }
        }
    }
}
