//! One registered file descriptor and its readiness, per direction.
//!
//! Sources are registered edge-triggered (one `epoll_ctl` for their whole life), so the
//! kernel reports a *change* to ready, not the state. The source therefore remembers
//! readiness itself, the way tokio's `ScheduledIo` does:
//!
//! * an event sets the direction's `ready` flag, bumps its `tick` and wakes its waiters;
//! * an operation that fails with `WouldBlock` clears `ready`, but only if no event arrived
//!   since the readiness it acted on (same `tick`), so an edge that raced with the failing
//!   syscall is never lost;
//! * a fresh source starts ready in both directions: the first operation finds out;
//! * a stream read that comes back short also clears read readiness (tokio does the same),
//!   saving the read that would only return `WouldBlock`, but only while every event since
//!   the last `WouldBlock` said whether the peer had closed (`EPOLLRDHUP`, see `epoll`): a
//!   FIN that came with the data raises no edge of its own, so once one was seen the
//!   direction stays ready for good, and the reader sees the end of the stream.
//!
//! A direction may also carry a persistent callback (`add_reader`/`add_writer`); such fds
//! are registered level-triggered instead, as asyncio's selector loop does, and the callback
//! is queued once per harvest while the fd stays ready.

use std::fmt;
use std::os::fd::RawFd;
use std::panic::Location;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

use super::epoll::Readiness;

/// Which way the IO goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Read = 0,
    Write = 1,
}

/// A persistent readiness callback registered with `add_reader`/`add_writer`.
pub(crate) type FdCallback = Arc<dyn Fn() + Send + Sync + 'static>;

#[derive(Default)]
struct DirectionState {
    ready: bool,
    tick: u64,
    /// The peer closed (or the fd failed): reads never block again, readiness stays.
    closed: bool,
    /// Every event since the last `WouldBlock` said whether the peer closed: only then may a
    /// short read clear readiness.
    exact: bool,
    wakers: Vec<Waker>,
    callback: Option<(FdCallback, &'static Location<'static>)>,
}

/// A readiness observed by [`Source::poll_ready`], to be cleared if the operation blocks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadyEvent {
    tick: u64,
}

/// A registered file descriptor.
pub(crate) struct Source {
    pub(crate) fd: RawFd,
    pub(crate) key: usize,
    /// Index of the worker whose poller holds the registration.
    pub(crate) worker: usize,
    state: Mutex<[DirectionState; 2]>,
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Source")
            .field("fd", &self.fd)
            .field("key", &self.key)
            .field("worker", &self.worker)
            .finish()
    }
}

/// An fd callback due to run because its fd was ready at harvest time.
pub(crate) struct DueCallback {
    pub(crate) source: Arc<Source>,
    pub(crate) dir: Direction,
    pub(crate) callback: FdCallback,
    pub(crate) location: &'static Location<'static>,
}

impl DueCallback {
    /// Runs the callback unless it was removed or replaced since the harvest (asyncio's
    /// `remove_reader` cancels the handle already queued, too).
    pub(crate) fn run(&self) {
        if self.source.is_current_callback(self.dir, &self.callback) {
            (self.callback)();
        }
    }
}

/// What an event asks the caller to do once every lock is released.
#[derive(Default)]
pub(crate) struct EventActions {
    pub(crate) wakers: Vec<Waker>,
    pub(crate) callbacks: Vec<DueCallback>,
    /// Siblings whose epoll, nested in the harvested one, has events (`worker::handoff`).
    pub(crate) nested: Vec<usize>,
}

impl Source {
    pub(crate) fn new(fd: RawFd, key: usize, worker: usize) -> Self {
        let ready = || DirectionState {
            ready: true,
            ..Default::default()
        };
        Source {
            fd,
            key,
            worker,
            state: Mutex::new([ready(), ready()]),
        }
    }

    /// Records an event from the poller and collects whom to wake or call.
    pub(crate) fn on_event(self: &Arc<Self>, event: Readiness, actions: &mut EventActions) {
        let mut state = self.state.lock();
        let hits = [
            (Direction::Read, event.readable),
            (Direction::Write, event.writable),
        ];
        for (dir, hit) in hits {
            if !hit {
                continue;
            }
            let d = &mut state[dir as usize];
            if dir == Direction::Read {
                match event.read_closed {
                    Some(closed) => d.closed |= closed,
                    None => d.exact = false,
                }
            }
            d.ready = true;
            d.tick = d.tick.wrapping_add(1);
            actions.wakers.append(&mut d.wakers);
            if let Some((callback, location)) = &d.callback {
                actions.callbacks.push(DueCallback {
                    source: self.clone(),
                    dir,
                    callback: callback.clone(),
                    location,
                });
            }
        }
    }

    /// Ready in `dir`? If not, registers `cx`'s waker for the next event.
    pub(crate) fn poll_ready(&self, dir: Direction, cx: &mut Context<'_>) -> Poll<ReadyEvent> {
        let mut state = self.state.lock();
        let d = &mut state[dir as usize];
        if d.ready {
            return Poll::Ready(ReadyEvent { tick: d.tick });
        }
        if !d.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            d.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Ready in `dir`? Unlike `poll_ready`, registers nobody when not (a `try_` operation
    /// that never waits).
    pub(crate) fn ready_now(&self, dir: Direction) -> Option<ReadyEvent> {
        let d = &self.state.lock()[dir as usize];
        d.ready.then_some(ReadyEvent { tick: d.tick })
    }

    /// The operation that acted on `event` would block: forget that readiness, unless a newer
    /// event arrived meanwhile.
    pub(crate) fn clear_ready(&self, dir: Direction, event: ReadyEvent) {
        let mut state = self.state.lock();
        let d = &mut state[dir as usize];
        if d.tick == event.tick {
            d.ready = false;
            d.exact = true;
        }
    }

    /// A stream transfer acting on `event` moved less than asked: forget that readiness. A
    /// short write always may (the send buffer is full); a short read only if the peer has
    /// not closed and every event since the last `WouldBlock` said so (see the module docs).
    pub(crate) fn clear_after_short(&self, dir: Direction, event: ReadyEvent) {
        let mut state = self.state.lock();
        let d = &mut state[dir as usize];
        let provable = dir == Direction::Write || (d.exact && !d.closed);
        if d.tick == event.tick && provable {
            d.ready = false;
        }
    }

    /// Forgets the optimistic initial readiness of `dir`, unless an event already came: for
    /// operations (a non-blocking `connect`) that must wait for a real event.
    pub(crate) fn unset_initial_ready(&self, dir: Direction) {
        let mut state = self.state.lock();
        let d = &mut state[dir as usize];
        if d.tick == 0 {
            d.ready = false;
        }
    }

    /// Installs or removes a persistent callback; returns whether one was installed before.
    pub(crate) fn set_callback(
        &self,
        dir: Direction,
        callback: Option<(FdCallback, &'static Location<'static>)>,
    ) -> bool {
        let old = std::mem::replace(&mut self.state.lock()[dir as usize].callback, callback);
        old.is_some()
    }

    /// Whether `callback` is (still) the one installed for `dir`.
    pub(crate) fn is_current_callback(&self, dir: Direction, callback: &FdCallback) -> bool {
        self.state.lock()[dir as usize]
            .callback
            .as_ref()
            .is_some_and(|(c, _)| Arc::ptr_eq(c, callback))
    }

    /// Whether a persistent callback is installed for `dir`.
    pub(crate) fn has_callback(&self, dir: Direction) -> bool {
        self.state.lock()[dir as usize].callback.is_some()
    }

    /// Wakes every waiter (the source is going away or the runtime shuts down).
    pub(crate) fn wake_all(&self) {
        let wakers: Vec<Waker> = {
            let mut state = self.state.lock();
            let mut w = std::mem::take(&mut state[0].wakers);
            w.append(&mut state[1].wakers);
            w
        };
        for w in wakers {
            crate::exception::contain_here(
                "Exception in a waker woken by a closing IO source",
                || w.wake(),
            );
        }
    }
}
