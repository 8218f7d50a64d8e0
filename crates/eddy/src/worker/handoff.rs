//! Parking with our IO handed to a sibling: one poller watches for two under light load.
//!
//! Each worker's sockets live in its own epoll. A worker that parks on that epoll is woken
//! by every event on its sockets, even when a sibling is awake and could serve them in
//! passing. On a machine with as many busy threads as cores (a server and its clients on
//! two cores) every such wake-up makes one more thread runnable than there are CPUs, and
//! the event then waits a whole scheduler slice for the woken worker to run. With all
//! sockets on one worker the same server keeps its tail latency well under a slice
//! (docs/benchmarks.md, "echo"). Tokio gets this from its single IO driver.
//!
//! So a worker that parks with IO sources first tries to **hand its epoll to a sibling**:
//! it adds its epoll fd to the sibling's epoll (epoll nests; the guest's fd is readable
//! while it has events) under the key `NESTED_KEY_BASE + index`, and sleeps on a private
//! eventfd (`ParkFd`) instead of its epoll. The host harvests the guest's epoll whenever
//! its own wait reports that key, so the guest's events run on the host and the guest
//! sleeps on. The guest wakes for the same reasons as a worker parked on its own epoll:
//! `WorkerSlot::notify` writes the eventfd while the worker is a guest (new work, a
//! timer pushed at it, the monitor asking for help, shutdown), or its earliest timer is due.
//! On waking it takes its epoll back and harvests it once.
//!
//! Invariants (all changed under `Shared::handoff`, so two workers never hand off to each
//! other at once):
//! * a guest hosts nobody, and a host is nobody's guest: nesting is one level deep, and
//!   every guest epoll sits in an epoll that its owner waits on or harvests every cycle;
//! * `io_host` is set only while the guest's fd is in the host's epoll.
//!
//! A host pays for each of its guests' events a second `epoll_wait` (the guest's, after its
//! own reported it). So a parked sibling hosts only if it has IO of its own (`can_host`),
//! which would wake it anyway, and a host woken many times in a row only for its guest's
//! events (`GuestOnlyWakes`) gives the hosting up when it next parks: the guest is woken to
//! wait on its own epoll again, and the host's epoll, if it has sockets, goes into the
//! guest's (`pass_hosting_locked`). With one busy connection on the guest that saves one
//! system call per request.
//!
//! A host serves its guests' events in its phase 2, so while it runs a long cycle (many
//! jobs, or long ones) they wait. A host that has not harvested for `STUCK_IO_GRACE` wakes
//! a guest whose epoll has events (`wake_guests_if_we_lag`, between jobs), and a host stuck
//! in one job counts as having IO for the monitor, which then wakes a parked sibling.
//!
//! Why a notification is never lost: one sent before `io_host` is set went to the guest's
//! own epoll notifier; the guest checks its epoll once after nesting it (and does not sleep
//! if anything is there), and anything later shows up in the host's wait, whose harvest of
//! the guest re-notifies it (now through the eventfd). A stale eventfd count only makes a
//! later sleep return at once. A host re-notifies only a sibling marked parked, so a
//! notification it consumes earlier, while the sibling is still on its way to sleep (its
//! epoll nested by a rescue), is dropped: what such a notification announces (work queued,
//! or a waker taking the sibling off the parked list to search) is what `Worker::park`
//! looks at after marking itself parked (`ParkCheck`), and a loom model covers it.
//!
//! Who may call: the worker itself, from `park` (`park_as_guest`) and between jobs
//! (`wake_guests_if_we_lag`); other threads only through `WorkerSlot::notify`. Workers
//! without IO sources never hand off (there is nothing to watch, and a plain park is one
//! system call cheaper both ways).

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::{Duration, Instant};

use super::host_tally::GuestOnlyWakes;
use super::Worker;
use crate::reactor::epoll;
use crate::reactor::{Reactor, STUCK_IO_GRACE};

/// How often a host in a long cycle looks whether its guests have IO waiting.
const GUEST_CHECK_INTERVAL: Duration = Duration::from_micros(250);

/// Whether a park that may last `timeout` is worth taking as a guest: any that sleeps at
/// all (the hand-off's four system calls do not show beside a wake-up saved).
fn worth_a_guest_sleep(timeout: Option<Duration>) -> bool {
    timeout != Some(Duration::ZERO)
}

/// Whether a sibling can host our epoll: an awake one serves our events in passing; a parked
/// one only if it has IO of its own (sockets, or guests), which would wake it anyway. A
/// parked sibling without IO would be woken by our events alone, and pay a second
/// `epoll_wait` (ours) for each, where we, waiting on our own epoll, make one.
fn can_host(parked: bool, has_io: bool) -> bool {
    !parked || has_io
}

/// The sibling to hand our epoll to, from `(index, parked)` of those that can host it
/// (`can_host`): an awake host serves our events in passing; a parked one is woken by them
/// (then only one of us wakes per event instead of both). The first awake one, else the
/// first parked one.
fn choose_host(candidates: impl Iterator<Item = (usize, bool)>) -> Option<usize> {
    candidates
        .min_by_key(|&(_, parked)| parked)
        .map(|(index, _)| index)
}

/// Whether a host in a long cycle should look at its guests' epolls now (timer-heap
/// nanoseconds): it has not harvested for `STUCK_IO_GRACE` and its last look is at least
/// `GUEST_CHECK_INTERVAL` old (`next_check`).
fn host_lags(now: u64, last_polled: u64, next_check: u64) -> bool {
    now >= next_check && now.saturating_sub(last_polled) >= STUCK_IO_GRACE.as_nanos() as u64
}

impl Worker {
    /// Parks until `timeout` with our epoll handed to a sibling. False, without sleeping,
    /// if no sibling can take it (the caller then parks on its own epoll).
    pub(super) fn park_as_guest(&self, timeout: Option<Duration>) -> bool {
        let slot = self.slot();
        let sleeps = worth_a_guest_sleep(timeout);
        if !slot.reactor.has_sources() {
            if sleeps && slot.hosted.load(SeqCst) != 0 && self.guest_only_wakes.get().pass_hosting()
            {
                // Nothing of ours to nest: the guest just waits on its own epoll again.
                self.guest_only_wakes.set(GuestOnlyWakes::default());
                let _guard = self.shared.handoff.lock();
                self.pass_hosting_locked(false);
            }
            self.take_back_io();
            return false;
        }
        let host = if sleeps { self.hand_off_io() } else { None };
        let Some(host) = host else {
            // Our own wait must be the only one on our epoll: a rescuer still nesting it
            // would be woken by every event as well.
            self.take_back_io();
            return false;
        };
        slot.guest_asleep.store(true, SeqCst);
        // Events (or a notification) that arrived before we said so: take them ourselves
        // rather than wait for the host to pass them on.
        if !Reactor::maybe_ready(&slot.poller) && !self.shared.is_closed() {
            slot.counters.guest_parks.add(1);
            slot.park_fd.sleep(timeout);
        }
        slot.guest_asleep.store(false, SeqCst);
        self.take_back_io();
        debug_assert_ne!(host, self.index);
        true
    }

    /// Between two jobs: if we host guests, have not harvested for `STUCK_IO_GRACE` (we are
    /// in a long cycle) and a sleeping guest has events waiting, wake that guest to serve
    /// them itself. Harvesting them here would not do: what a harvest wakes runs in our next
    /// cycle, after the rest of this one. Checked at most every `GUEST_CHECK_INTERVAL`.
    #[inline]
    pub(super) fn wake_guests_if_we_lag(&self) {
        let slot = self.slot();
        if slot.hosted.load(Relaxed) == 0 {
            return;
        }
        let now = slot.timers.nanos(Instant::now());
        if !host_lags(now, slot.reactor.last_polled(), self.next_guest_check.get()) {
            return;
        }
        self.next_guest_check
            .set(now + GUEST_CHECK_INTERVAL.as_nanos() as u64);
        for guest in self.shared.workers.iter() {
            if guest.io_host.is(self.index)
                && guest.guest_asleep.load(SeqCst)
                && Reactor::maybe_ready(&guest.poller)
            {
                guest.notify();
            }
        }
    }

    /// Rescue: nests the epoll of sibling `stalled`, awake but not harvesting (stuck in a
    /// long job, or its thread waiting for a CPU), in ours, so that its events wake us and
    /// are served here until it parks again (then it takes its epoll back). False if the
    /// nesting rules forbid it now: it is nested somewhere already, or hosts guests itself
    /// (nesting is one level deep).
    pub(super) fn host_stalled(&self, stalled: usize) -> bool {
        let shared = &*self.shared;
        let me = self.slot();
        let them = &shared.workers[stalled];
        let _guard = shared.handoff.lock();
        // An exited worker is gone for good at shutdown; a dead one is adopted.
        let gone = them.exited.load(SeqCst) && !them.dead.load(SeqCst);
        if them.io_host.get().is_some() || them.hosted.load(SeqCst) != 0 || them.is_parked() || gone
        {
            return false;
        }
        // We are awake: if a rescuer still nests our epoll, take it back first (a host is
        // nobody's guest, and nesting `them` under us while we sit under them is a loop).
        self.take_back_io_locked();
        let key = epoll::NESTED_KEY_BASE + stalled;
        if epoll::add_nested(&me.poller, &them.poller, key).is_err() {
            return false;
        }
        them.io_host.set(self.index);
        me.hosted.fetch_add(1, SeqCst);
        true
    }

    /// Whether sibling `w`'s epoll is nested in ours while it is awake (a rescue), so that
    /// its timers are ours to watch too.
    pub(super) fn rescues(&self, w: &super::shared::WorkerSlot) -> bool {
        w.io_host.is(self.index) && !w.guest_asleep.load(SeqCst)
    }

    /// Nests our epoll in the sibling that can host it (or keeps it where a rescuer put
    /// it). Returns the host.
    fn hand_off_io(&self) -> Option<usize> {
        let shared = &*self.shared;
        let me = self.slot();
        let _guard = shared.handoff.lock();
        if me.hosted.load(SeqCst) != 0 {
            if !self.guest_only_wakes.get().pass_hosting() {
                return None;
            }
            self.guest_only_wakes.set(GuestOnlyWakes::default());
            return self.pass_hosting_locked(true);
        }
        if let Some(nested_in) = me.io_host.get() {
            // A rescuer hosts us already, and a host is nobody's guest: stay there.
            return Some(nested_in);
        }
        let candidates = shared
            .workers
            .iter()
            .enumerate()
            // Spares are not hosts: waking one for a worker's events would keep it busy for
            // nothing once it is no longer needed.
            .take(shared.regular)
            .filter(|&(i, w)| {
                i != self.index && w.io_host.get().is_none() && !w.exited.load(SeqCst)
            })
            .map(|(i, w)| (i, w.is_parked(), w.has_io()))
            .filter(|&(_, parked, has_io)| can_host(parked, has_io))
            .map(|(i, parked, _)| (i, parked));
        let host = choose_host(candidates)?;
        let key = epoll::NESTED_KEY_BASE + self.index;
        if epoll::add_nested(&shared.workers[host].poller, &me.poller, key).is_err() {
            return None;
        }
        me.io_host.set(host);
        shared.workers[host].hosted.fetch_add(1, SeqCst);
        Some(host)
    }

    /// With `Shared::handoff` held, while we park: gives up hosting our one guest, a regular
    /// worker asleep as our guest, whose sockets have carried all the events we woke for
    /// lately (`GuestOnlyWakes`). Its epoll leaves ours and it is woken to wait on its own
    /// epoll from now on; with `nest_ours`, ours goes into its, and we then sleep as its
    /// guest. Returns the new host, or `None` (we park on our own epoll) if we did not nest
    /// ours, host anyone else, or the guest is no longer asleep as ours.
    ///
    /// Until the woken guest waits on its epoll, nobody watches ours there; it harvests its
    /// epoll, and so ours, as soon as it is up (as any guest does on waking).
    fn pass_hosting_locked(&self, nest_ours: bool) -> Option<usize> {
        let shared = &*self.shared;
        let me = self.slot();
        if me.hosted.load(SeqCst) != 1 || me.io_host.get().is_some() {
            return None;
        }
        let (g, guest) = shared
            .workers
            .iter()
            .enumerate()
            .take(shared.regular)
            .find(|&(i, w)| i != self.index && w.io_host.is(self.index))?;
        if !guest.guest_asleep.load(SeqCst) || guest.exited.load(SeqCst) {
            return None;
        }
        if let Err(e) = epoll::delete_nested(&me.poller, &guest.poller) {
            tracing::error!(
                "eddy worker {}: passing the hosting failed: {e}",
                self.index
            );
            return None;
        }
        guest.io_host.clear();
        me.hosted.fetch_sub(1, SeqCst);
        let key = epoll::NESTED_KEY_BASE + self.index;
        let nested = nest_ours && epoll::add_nested(&guest.poller, &me.poller, key).is_ok();
        if nested {
            me.io_host.set(g);
            guest.hosted.fetch_add(1, SeqCst);
        }
        // Asleep on its eventfd, it would not see its own sockets' events now.
        guest.notify();
        nested.then_some(g)
    }

    /// Takes our epoll back from whoever nests it, if anyone; it is ours alone to wait on
    /// again.
    fn take_back_io(&self) {
        if self.slot().io_host.get().is_none() {
            return;
        }
        let _guard = self.shared.handoff.lock();
        self.take_back_io_locked();
    }

    /// `take_back_io` with `Shared::handoff` held.
    fn take_back_io_locked(&self) {
        let shared = &*self.shared;
        let me = self.slot();
        let Some(host) = me.io_host.get() else {
            return;
        };
        if let Err(e) = epoll::delete_nested(&shared.workers[host].poller, &me.poller) {
            tracing::error!(
                "eddy worker {}: taking back its epoll failed: {e}",
                self.index
            );
        }
        me.io_host.clear();
        shared.workers[host].hosted.fetch_sub(1, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_park_that_does_not_sleep_stays_on_our_own_epoll() {
        assert!(worth_a_guest_sleep(None), "a park without a deadline");
        assert!(worth_a_guest_sleep(Some(Duration::from_micros(1))));
        assert!(!worth_a_guest_sleep(Some(Duration::ZERO)));
    }

    #[test]
    fn an_awake_host_is_preferred_to_a_parked_one() {
        assert_eq!(
            choose_host([(0, true), (2, false), (3, false)].into_iter()),
            Some(2)
        );
        assert_eq!(choose_host([(1, true), (3, true)].into_iter()), Some(1));
        assert_eq!(choose_host(std::iter::empty()), None);
    }

    #[test]
    fn a_parked_sibling_hosts_only_if_it_has_io_of_its_own() {
        assert!(
            can_host(false, false),
            "awake: serves our events in passing"
        );
        assert!(can_host(false, true));
        assert!(can_host(true, true), "woken by its own IO anyway");
        assert!(
            !can_host(true, false),
            "it would wake for our events alone, with an epoll_wait more"
        );
    }

    #[test]
    fn a_host_looks_at_its_guests_only_when_it_lags_and_not_too_often() {
        let grace = STUCK_IO_GRACE.as_nanos() as u64;
        let t = 10 * grace;
        assert!(host_lags(t, t - grace, t), "harvested a grace ago");
        assert!(!host_lags(t, t - grace + 1, t), "harvested recently");
        assert!(!host_lags(t, 0, t + 1), "looked too recently");
        assert!(host_lags(t, 0, 0));
    }
}
