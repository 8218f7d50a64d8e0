//! The reactor: each worker's `polling::Poller` as its selector (phase 2 of `_run_once`).
//!
//! Every worker owns one [`Reactor`] beside its `Poller`. An IO source is registered with
//! the poller of the worker that first uses it (lazily, by its first operation), so its
//! events are harvested by that worker and the tasks they wake land in that worker's own
//! ready queue, where the task that uses the source most likely runs.
//!
//! Costs we design around: one `Poller::wait` is five system calls even with a zero
//! timeout, while one `epoll_wait` is one (docs/decisions.md, "Workers wait in a bare
//! `epoll_wait`"). So:
//!
//! * harvesting and parking are a single `epoll_wait` on the poller's fd ([`epoll`]);
//!   `polling`'s own `wait` runs only to re-arm its notifier after one of our waits reported
//!   it (see [`Reactor::harvest`]), which happens once per wake-up by `notify`, not per cycle;
//! * a worker with no registered source never polls while it has work;
//! * an idle worker harvests in the same wait it parks in;
//! * stream sources are edge-triggered with `EPOLLRDHUP` (registered once, no re-arming
//!   `epoll_ctl` per event, and a short read can retire readiness, see `source`);
//!   `add_reader`/`add_writer` fds are level-triggered, as asyncio's selector loop is.
//!
//! **IO of a stuck worker.** If a worker has not harvested for [`STUCK_IO_GRACE`] (it is
//! busy, or its thread was woken from its park but waits for a CPU), or the monitor found
//! its thread blocked in a system call inside a job, a sibling checks its epoll fd with
//! `poll(2)` and, if events are waiting, harvests them itself with a zero-timeout
//! `epoll_wait` and dispatches them: wakers run on the sibling (so the woken tasks are
//! queued, and run, there) and fd callbacks are queued there. Three hazards of sharing a
//! `Poller` are handled:
//!
//! 1. *One waiter per poller*: `polling`'s `wait` only try-locks. We call it for nothing but
//!    re-arming, always under our own `rearm` lock, so its try-lock never fails and a
//!    notifier is never left disarmed. The kernel lets several threads `epoll_wait` on one
//!    fd; each event goes to one of them.
//! 2. *Events go to whoever waits*: the sibling dispatches what it harvested through the
//!    owner's source table (shared, behind a mutex), so no event is lost.
//! 3. *A sibling's wait swallows the owner's pending `notify()`*: if the sibling's harvest
//!    included the notifier, it re-arms it and notifies the owner again; at worst the
//!    owner's next wait returns at once.

pub(crate) mod epoll;
mod source;

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use polling::{Event, Events, PollMode, Poller};
use slab::Slab;

use epoll::{RawEvents, Readiness};

pub(crate) use source::{Direction, EventActions, FdCallback, Source};

/// How long a busy worker may go without harvesting its IO before a sibling serves it.
pub(crate) const STUCK_IO_GRACE: Duration = Duration::from_micros(250);

/// A source's key in the poller: its slot in the table in the low 32 bits and a generation
/// above, so that an event harvested for a source that is deregistered, and its slot reused,
/// before the event is dispatched does not reach the new source (a stale writable event
/// could make a pending `connect` look finished). Always below `epoll::NESTED_KEY_BASE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SourceKey(usize);

impl SourceKey {
    const SLOT_BITS: u32 = 32;
    /// Generations wrap here, keeping keys clear of the nested-epoll and notifier keys.
    const GENERATIONS: usize = 1 << 30;

    fn new(slot: usize, generation: usize) -> SourceKey {
        debug_assert!(
            slot < 1 << Self::SLOT_BITS,
            "too many IO sources on one worker"
        );
        SourceKey(slot | (generation % Self::GENERATIONS) << Self::SLOT_BITS)
    }

    fn slot(key: usize) -> usize {
        key & ((1 << Self::SLOT_BITS) - 1)
    }
}

/// One worker's IO registrations.
#[derive(Debug)]
pub(crate) struct Reactor {
    sources: Mutex<Slab<Arc<Source>>>,
    /// The generation of the next registration (see [`SourceKey`]); under `sources`' lock.
    generation: AtomicUsize,
    /// Number of registered sources; read without the lock on every busy cycle.
    count: AtomicUsize,
    /// fds watched with `add_reader`/`add_writer`.
    watched: Mutex<HashMap<RawFd, Arc<Source>>>,
    /// When the owner last harvested events (the timer heaps' nanosecond scale).
    last_poll: AtomicU64,
    /// Serialises `polling`'s own `wait` (our notifier re-arm) and holds its event buffer.
    rearm: Mutex<Events>,
    /// The last re-arm failed: the notifier is disarmed (see `harvest`).
    rearm_failed: AtomicBool,
    /// Tests only: the next this many re-arms fail.
    #[cfg(test)]
    fail_rearms: AtomicUsize,
}

/// How long a wait may last while the notifier is disarmed (a re-arm failed): the longest a
/// `notify` then goes unnoticed.
const REARM_RETRY: Duration = Duration::from_millis(1);

/// What one harvest found.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Harvest {
    /// IO events dispatched.
    pub(crate) events: usize,
    /// The poller's notifier fired (and was re-armed): someone called `notify`.
    pub(crate) notified: bool,
}

impl Reactor {
    pub(crate) fn new() -> Self {
        Reactor {
            sources: Mutex::new(Slab::new()),
            generation: AtomicUsize::new(0),
            count: AtomicUsize::new(0),
            watched: Mutex::new(HashMap::new()),
            last_poll: AtomicU64::new(0),
            rearm: Mutex::new(Events::new()),
            rearm_failed: AtomicBool::new(false),
            #[cfg(test)]
            fail_rearms: AtomicUsize::new(0),
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
        let fd = fd.as_raw_fd();
        self.register_with(worker, fd, |key| epoll::add_edge(poller, fd, key))
    }

    /// Enters a source for `fd` in the table and adds it to the poller with `add`.
    fn register_with(
        &self,
        worker: usize,
        fd: RawFd,
        add: impl FnOnce(usize) -> io::Result<()>,
    ) -> io::Result<Arc<Source>> {
        let source = {
            let mut sources = self.sources.lock();
            let entry = sources.vacant_entry();
            let generation = self.generation.fetch_add(1, Ordering::Relaxed);
            let key = SourceKey::new(entry.key(), generation);
            let source = Arc::new(Source::new(fd, key.0, worker));
            entry.insert(source.clone());
            source
        };
        if let Err(e) = add(source.key) {
            self.sources.lock().remove(SourceKey::slot(source.key));
            return Err(e);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        Ok(source)
    }

    /// Removes a source from `poller` and from the table.
    pub(crate) fn deregister(&self, poller: &Poller, source: &Source) -> io::Result<()> {
        // SAFETY: `Async::drop` runs before its IO object is dropped, and `remove_*` before
        // the user closes the fd (their documented contract), so `source.fd` is still open
        // here, for the duration of the borrow.
        let fd = unsafe { BorrowedFd::borrow_raw(source.fd) };
        let res = poller.delete(fd);
        if self
            .sources
            .lock()
            .try_remove(SourceKey::slot(source.key))
            .is_some()
        {
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
                let add = |key| {
                    // SAFETY: `add_with_mode` requires the fd to be deleted from the poller
                    // before it is closed, and `add_reader`/`add_writer` document that the
                    // caller must remove the fd before closing it, so the fd stays registered
                    // only while it is open. On Linux (epoll) a violation cannot corrupt memory
                    // either: the kernel drops closed fds from the interest list by itself and
                    // `polling` keeps no per-fd state.
                    unsafe { poller.add_with_mode(fd, Event::none(key), PollMode::Level) }
                };
                let s = self.register_with(worker, fd, add)?;
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

    /// One `epoll_wait` on `poller` (at most `timeout`), dispatched into `actions`. If the
    /// notifier fired, it is re-armed before returning, so the poller can be slept on again.
    ///
    /// If re-arming fails, a `notify` can no longer end a wait: until a later harvest
    /// re-arms it, every wait is cut to [`REARM_RETRY`] and the first wait after a
    /// successful retry does not block (the retry may have drained a notification).
    pub(crate) fn harvest(
        &self,
        poller: &Poller,
        raw: &mut RawEvents,
        mut timeout: Option<Duration>,
        actions: &mut EventActions,
    ) -> io::Result<Harvest> {
        let mut rearmed = None;
        if self.rearm_failed.load(Ordering::Relaxed) {
            match self.rearm_notifier(poller, actions) {
                Ok(events) => {
                    self.rearm_failed.store(false, Ordering::Relaxed);
                    rearmed = Some(events);
                    timeout = Some(Duration::ZERO);
                }
                Err(_) => timeout = Some(timeout.map_or(REARM_RETRY, |t| t.min(REARM_RETRY))),
            }
        }
        let waited = epoll::wait(poller, raw, timeout);
        let mut harvest = Harvest {
            events: self.dispatch(raw.iter(), actions) + rearmed.unwrap_or(0),
            notified: raw.notified() || rearmed.is_some(),
        };
        actions.nested.extend(raw.nested());
        if raw.notified() {
            match self.rearm_notifier(poller, actions) {
                Ok(events) => harvest.events += events,
                Err(e) => {
                    self.rearm_failed.store(true, Ordering::Relaxed);
                    tracing::error!("eddy: re-arming a worker's notifier failed ({e}); retrying");
                }
            }
        }
        waited.map(|_| harvest)
    }

    /// Runs `polling`'s `wait` once, with a zero timeout, for its side effects: it drains the
    /// notifier's eventfd and re-arms it (oneshot). Events it happens to harvest are
    /// dispatched too, without `EPOLLRDHUP` information.
    fn rearm_notifier(&self, poller: &Poller, actions: &mut EventActions) -> io::Result<usize> {
        #[cfg(test)]
        if self.fail_rearms.load(Ordering::Relaxed) > 0 {
            self.fail_rearms.fetch_sub(1, Ordering::Relaxed);
            return Err(io::Error::other("injected re-arm failure"));
        }
        let mut events = self.rearm.lock();
        events.clear();
        poller.wait(&mut events, Some(Duration::ZERO))?;
        actions
            .nested
            .extend(events.iter().filter_map(|e| epoll::nested_index(e.key)));
        let ours = events
            .iter()
            .filter(|e| epoll::nested_index(e.key).is_none());
        Ok(self.dispatch(ours.map(|e| epoll::from_polling(&e)), actions))
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
    /// Returns the number of events.
    fn dispatch(
        &self,
        events: impl Iterator<Item = Readiness>,
        actions: &mut EventActions,
    ) -> usize {
        let mut events = events.peekable();
        if events.peek().is_none() {
            return 0;
        }
        let sources = self.sources.lock();
        let mut n = 0;
        for ev in events {
            n += 1;
            match sources.get(SourceKey::slot(ev.key)) {
                Some(source) if source.key == ev.key => source.on_event(ev, actions),
                // Deregistered after the harvest (and maybe the slot reused): stale.
                _ => {}
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::task::{Context, Poll, Wake, Waker};

    struct Counted(std::sync::atomic::AtomicUsize);
    impl Wake for Counted {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A failed re-arm leaves the notifier disarmed; the next harvest re-arms it and reports
    /// the notification sent meanwhile instead of sleeping through it (here: 10 s).
    #[test]
    fn a_notification_sent_while_the_notifier_could_not_be_rearmed_is_not_lost() -> io::Result<()> {
        let poller = Poller::new()?;
        let reactor = Reactor::new();
        let mut raw = RawEvents::new();
        let long = Some(Duration::from_secs(10));
        reactor.fail_rearms.store(1, Ordering::Relaxed);
        poller.notify()?;
        let mut actions = EventActions::default();
        assert!(
            reactor
                .harvest(&poller, &mut raw, long, &mut actions)?
                .notified
        );
        poller.notify()?;
        let h = reactor.harvest(&poller, &mut raw, long, &mut actions)?;
        assert!(h.notified, "the notification sent while disarmed was lost");
        // Re-armed for good: the next notification wakes a wait as usual.
        poller.notify()?;
        assert!(
            reactor
                .harvest(&poller, &mut raw, long, &mut actions)?
                .notified
        );
        Ok(())
    }

    /// An event harvested for a source that is then deregistered, its slot taken by a new
    /// source, must not reach the new one.
    #[test]
    fn a_stale_event_does_not_reach_the_source_that_reused_its_slot() -> io::Result<()> {
        let poller = Poller::new()?;
        let reactor = Reactor::new();
        let (a, _a_peer) = std::os::unix::net::UnixStream::pair()?;
        let (b, _b_peer) = std::os::unix::net::UnixStream::pair()?;
        let old = reactor.register(&poller, 0, a.as_fd())?;
        let stale = Readiness {
            key: old.key,
            readable: true,
            writable: true,
            read_closed: Some(false),
        };
        reactor.deregister(&poller, &old)?;
        let new = reactor.register(&poller, 0, b.as_fd())?;
        assert_eq!(
            SourceKey::slot(new.key),
            SourceKey::slot(old.key),
            "slot reused"
        );
        // The new source waits for a real event in both directions.
        let counted = Arc::new(Counted(Default::default()));
        let waker = Waker::from(counted.clone());
        let mut cx = Context::from_waker(&waker);
        for dir in [Direction::Read, Direction::Write] {
            new.unset_initial_ready(dir);
            assert!(new.poll_ready(dir, &mut cx).is_pending());
        }
        let mut actions = EventActions::default();
        assert_eq!(reactor.dispatch(std::iter::once(stale), &mut actions), 1);
        assert!(
            actions.wakers.is_empty(),
            "the stale event woke the new source's waiter"
        );
        assert!(matches!(
            new.poll_ready(Direction::Write, &mut cx),
            Poll::Pending
        ));
        reactor.deregister(&poller, &new)?;
        Ok(())
    }

    /// Our own `epoll_wait` consumes `polling`'s oneshot notifier; `harvest` must re-arm it,
    /// or the next `notify` would not wake a sleeping worker (this wait would sleep its full
    /// 10 s and return without the notification instead).
    #[test]
    fn every_notify_wakes_a_harvest_because_the_notifier_is_rearmed() -> io::Result<()> {
        let poller = Poller::new()?;
        let reactor = Reactor::new();
        let mut raw = RawEvents::new();
        for round in 0..3 {
            poller.notify()?;
            let mut actions = EventActions::default();
            let h = reactor.harvest(
                &poller,
                &mut raw,
                Some(Duration::from_secs(10)),
                &mut actions,
            )?;
            assert!(
                h.notified,
                "round {round}: the wait did not see the notification"
            );
        }
        // And with nothing pending, a short wait times out quietly.
        let mut actions = EventActions::default();
        let h = reactor.harvest(
            &poller,
            &mut raw,
            Some(Duration::from_millis(1)),
            &mut actions,
        )?;
        assert!(!h.notified && h.events == 0);
        Ok(())
    }
}
