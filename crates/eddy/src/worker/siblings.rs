//! Helping siblings: what one worker does for the others. Kept apart from the loop itself
//! (`worker/mod.rs`) because none of it is needed to read `_run_once`; all of it is called
//! from phase 2 (an idle worker, before it parks), from the start of phase 4, or from the
//! maintenance of phase 4 (every `GLOBAL_QUEUE_INTERVAL` jobs of a busy worker, rate-limited
//! as below).
//!
//! * **Sharing a burst** with the sibling it woke for it (`share_burst_with_woken_sibling`):
//!   when jobs queued here woke a parked sibling (`Worker::push_local`) and that sibling is not
//!   up yet when phase 4 begins, the newer half of a large queue goes to the sibling's
//!   `burst_share` queue. A woken thread needs tens of microseconds to run; left alone, this
//!   worker would meanwhile have polled every task of the burst once, so whatever those first
//!   polls allocate (a channel's waiter list, a buffer) would come from this thread's heap,
//!   interleaved line by line with the memory of the tasks that stay here, and the half the
//!   sibling then steals would share cache lines with them across CPUs for the rest of its
//!   life. If we run out of work before the sibling is up, we take the share back
//!   (`reclaim_unclaimed_share`): no job waits on a slow wake-up while a worker idles.
//!
//! * **Stealing work** a sibling has queued: half its ready queue when we are idle
//!   (`steal_from_siblings`, a random victim first); when busy, all of it, from a sibling
//!   whose job count has not moved since our previous look (`steal_from_stalled_siblings`).
//! * **Taking IO** a sibling has not harvested: events waiting for an awake sibling when we
//!   are idle (`harvest_awake_siblings`), or for any sibling that has not harvested for
//!   `reactor::STUCK_IO_GRACE` or that the monitor found blocked in a system call
//!   (`rescue_stranded_io`).
//! * **Firing late timers** of a sibling stuck in a long job (`rescue_late_timers`).
//!
//! A busy worker looks every `SIBLING_LOOK_CHECK_JOBS` jobs (`run_order`), but at most
//! every [`SIBLING_LOOK_INTERVAL`]: each look reads cache lines its siblings write on every
//! job (their queue ends, job counters, cycle counters), so it costs a cache miss here and
//! another one on the sibling's next write, and looking every few microseconds would make
//! workers that share nothing pay for each other. Looking only at maintenance (every
//! `GLOBAL_QUEUE_INTERVAL` jobs) is not enough: with jobs of a few microseconds that is
//! every few hundred, and a sibling preempted right after its harvest left the jobs it
//! queued waiting for two such looks (docs/decisions.md).
//!
//! Only this worker's thread calls these; they touch siblings only through what `Shared`
//! shares on purpose (stealers, pollers and source tables, timer heaps with `try_lock`).

use std::sync::atomic::{self, Ordering::SeqCst};
use std::time::{Duration, Instant};

use crossbeam_deque::{Injector, Steal};

use super::shared::{WorkerSlot, STUCK_TIMER_GRACE};
use super::{RescueFrom, Worker};
use crate::job::Job;
use crate::reactor::{EventActions, Reactor, STUCK_IO_GRACE};

/// How often, at most, a busy worker looks after its siblings: half `STUCK_IO_GRACE`, so
/// that a sibling's queue waits about as long as its sockets before it is taken (a sibling
/// is stalled when it finished no job between two looks), and still tens of jobs apart.
pub(super) const SIBLING_LOOK_INTERVAL: Duration = Duration::from_micros(125);

/// The smallest ready queue worth splitting with a sibling that is still waking up: below
/// it, the jobs are likely done here before the sibling runs.
const BURST_TO_SHARE: usize = 16;

/// The largest: splitting copies the queue once; a longer one is left to the sibling's
/// stealing, a batch at a time.
const BURST_SHARE_MAX: usize = 1024;

/// Whether `queued` jobs at the start of phase 4 are a burst worth splitting with the
/// sibling woken for them, which is `still_parked` (not up yet).
fn should_share_burst(queued: usize, still_parked: bool) -> bool {
    still_parked && (BURST_TO_SHARE..=BURST_SHARE_MAX).contains(&queued)
}

/// Whether a sibling's timer heap, whose earliest deadline is `next_deadline`, is late
/// enough at `now` (timer-heap nanoseconds) for us to fire its due timers: by
/// `STUCK_TIMER_GRACE`, or at all if we `rescue` the sibling (it is known to be stuck).
fn timers_are_late(next_deadline: Option<u64>, now: u64, rescued: bool) -> bool {
    let grace = if rescued {
        0
    } else {
        STUCK_TIMER_GRACE.as_nanos() as u64
    };
    next_deadline.is_some_and(|d| d.saturating_add(grace) <= now)
}

/// Whether a sibling's IO, last harvested `since_harvest` nanoseconds ago, is stranded: past
/// `STUCK_IO_GRACE`, or at once if the monitor found the sibling's thread blocked in its
/// current job (`known_blocked`): a thread asleep in a system call will not harvest within
/// the grace, and waiting it out would only strand its sockets longer.
fn io_is_stranded(since_harvest: u64, known_blocked: bool) -> bool {
    known_blocked || since_harvest >= STUCK_IO_GRACE.as_nanos() as u64
}

/// Whether to look into a sibling's epoll for stranded IO (one `poll` system call): when
/// its IO is stranded, unless its epoll is nested in ours and our own wait comes next
/// (`our_wait_reports_it`): that wait, or the harvest that replaces it, reports the
/// sibling's events too, so on every idle cycle of a host the look would be a system call
/// for nothing. Between jobs of a long cycle of ours it is still worth one.
fn worth_a_look_for_stranded_io(
    our_wait_reports_it: bool,
    since_harvest: u64,
    known_blocked: bool,
) -> bool {
    !our_wait_reports_it && io_is_stranded(since_harvest, known_blocked)
}

/// Repeats a steal that lost a race (`Retry`) until it succeeds or finds nothing.
fn retry(mut steal: impl FnMut() -> Steal<()>) -> bool {
    loop {
        match steal() {
            Steal::Success(()) => return true,
            Steal::Empty => return false,
            Steal::Retry => continue,
        }
    }
}

impl Worker {
    /// Harvests the pollers of siblings that are awake: their events would otherwise wait
    /// for the sibling's next cycle (or, if its thread was preempted, for the scheduler)
    /// while we sleep. The woken tasks run here; their sockets stay registered where they
    /// are, so the next event goes to whichever of us looks first, as with one shared
    /// driver. A parked sibling is left alone: its own wait is already harvesting.
    pub(super) fn harvest_awake_siblings(&self) -> bool {
        self.harvest_siblings(|w| !w.is_parked())
    }

    /// Idle: steals half the queue of the first sibling that has work, starting from a
    /// random one so that thieves spread out.
    pub(super) fn steal_from_siblings(&self) -> bool {
        let n = self.shared.workers.len();
        if n == 1 {
            return false;
        }
        let start = self.next_random() as usize % n;
        (0..n)
            .map(|i| (start + i) % n)
            .any(|victim| victim != self.index && self.steal_batch_from(victim))
    }

    /// Moves half of worker `victim`'s ready queue to ours, or else a batch of the jobs
    /// handed to it and not yet taken. True if anything moved.
    fn steal_batch_from(&self, victim: usize) -> bool {
        let slot = &self.shared.workers[victim];
        let before = self.ready.len();
        let stole = retry(|| slot.stealer.steal_batch(&self.ready))
            || retry(|| slot.burst_share.steal_batch(&self.ready));
        if stole {
            self.count_steals(1, before);
        }
        stole
    }

    /// Counts `batches` steals on our metrics, which grew our ready queue from `before` jobs.
    fn count_steals(&self, batches: u64, before: usize) {
        let counters = &self.slot().counters;
        counters.steal_operations.add(batches);
        // Approximate: a sibling may be stealing from us at the same time.
        let moved = self.ready.len().saturating_sub(before);
        counters.stolen_items.add(moved as u64);
    }

    /// Moves worker `victim`'s ready queue to ours, a batch at a time (not its
    /// `burst_share` queue): as many jobs as it held when we began, so that a victim that
    /// resumes and pushes meanwhile cannot keep us here.
    fn steal_ready_queue_of(&self, victim: usize) {
        let stealer = &self.shared.workers[victim].stealer;
        let before = self.ready.len();
        let mut left = stealer.len();
        let mut batches = 0;
        while left > 0 {
            let had = self.ready.len();
            if !retry(|| stealer.steal_batch(&self.ready)) {
                break;
            }
            batches += 1;
            left = left.saturating_sub(self.ready.len().saturating_sub(had).max(1));
        }
        if batches > 0 {
            self.count_steals(batches, before);
        }
    }

    /// Moves every job of a `burst_share` queue (ours or a sibling's) to our ready queue.
    pub(super) fn take_burst_share(&self, share: &Injector<Job>) {
        while retry(|| share.steal_batch(&self.ready)) {}
    }

    /// Start of phase 4: if jobs queued here woke a sibling (`push_local`) that is not up
    /// yet, and `BURST_TO_SHARE` to `BURST_SHARE_MAX` jobs are ready, hands it the newer half
    /// of them (see the module notes for why). The older half runs here in order, as if the
    /// sibling had stolen the rest the moment the phase began: phase 4's rule holds.
    pub(super) fn share_burst_with_woken_sibling(&self) {
        let Some(sibling) = self.woken_for_surplus.take() else {
            return;
        };
        let queued = self.ready.len();
        let slot = &self.shared.workers[sibling];
        if !should_share_burst(queued, slot.is_parked()) || self.shared.is_closed() {
            return;
        }
        // The deque pops at the front only: take the jobs out and put the older half back.
        let mut jobs: Vec<_> = std::iter::from_fn(|| self.ready.pop())
            .take(queued)
            .collect();
        // A sibling may have stolen some meanwhile: the newer half of what is left.
        let newer = jobs.split_off(jobs.len() - jobs.len() / 2);
        for job in jobs {
            self.ready.push(job);
        }
        for job in newer {
            slot.burst_share.push(job);
        }
        // The other half of `drain_on_exit`'s handshake: a sibling that already made its
        // last drain would strand these (and leak them: jobs point back to `Shared`).
        atomic::fence(SeqCst);
        if slot.exited.load(SeqCst) {
            self.take_burst_share(&slot.burst_share);
            return;
        }
        self.burst_shared_with.set(Some(sibling));
        if slot.is_parked() {
            // Usually still on its way up (then this adds nothing to the pending wake-up);
            // but it may have woken, missed our push, and parked again. Its park checks
            // `burst_share` after publishing that it parks, we check its park after pushing.
            slot.notify();
        }
    }

    /// Phase 2, nothing ready: takes back what `share_burst_with_woken_sibling` handed to a
    /// sibling that is still not up. An idle worker does not leave work waiting for a sibling's
    /// wake-up (tens of microseconds, a scheduler slice when the CPUs are oversubscribed), and
    /// it may not search while the woken sibling counts as the searcher; the share pays off
    /// only while the older half keeps us busy, as a burst of long-lived tasks does. True if
    /// anything came back.
    pub(super) fn reclaim_unclaimed_share(&self) -> bool {
        let Some(sibling) = self.burst_shared_with.take() else {
            return false;
        };
        let slot = &self.shared.workers[sibling];
        if !slot.is_parked() {
            return false; // It is up and takes them itself.
        }
        let before = self.ready.len();
        self.take_burst_share(&slot.burst_share);
        self.ready.len() > before
    }

    /// Busy (between jobs, see `run_order::Maintenance`): the share of helping a busy
    /// worker does, if `SIBLING_LOOK_INTERVAL` has passed since the last look.
    pub(super) fn look_after_busy_siblings(&self) {
        if self.shared.workers.len() == 1 {
            return;
        }
        let now = Instant::now();
        if now < self.next_sibling_look.get() {
            return;
        }
        self.next_sibling_look.set(now + SIBLING_LOOK_INTERVAL);
        self.rescue_stuck_siblings(RescueFrom::BetweenJobs);
        self.steal_from_stalled_siblings();
    }

    /// Serves siblings stuck in a long job: fires their timers that are late by more than
    /// the grace period, and harvests their IO if they have not for `STUCK_IO_GRACE`. True
    /// if anything was found.
    pub(super) fn rescue_stuck_siblings(&self, from: RescueFrom) -> bool {
        let timers = self.rescue_late_timers();
        let io = self.rescue_stranded_io(from);
        timers || io
    }

    /// Serves the IO of awake siblings that have not harvested for `STUCK_IO_GRACE`: they are
    /// stuck in a long job, or their thread waits for a CPU (a worker woken from its park
    /// counts: its events sit in the kernel until it runs). Their epoll is nested in ours
    /// from now until they park again (`host_stalled`), so that what arrives next wakes us
    /// at once; what is waiting already is harvested here.
    fn rescue_stranded_io(&self, from: RescueFrom) -> bool {
        let workers = &self.shared.workers;
        if workers.len() == 1 {
            return false;
        }
        let now = self.slot().timers.nanos(Instant::now());
        let stranded = |w: &WorkerSlot| {
            io_is_stranded(
                now.saturating_sub(w.reactor.last_polled()),
                w.is_known_blocked(),
            )
        };
        for (i, w) in workers.iter().enumerate() {
            // A dead worker is adopted whole: its timers come with its epoll.
            let stalled = i != self.index
                && (w.dead.load(SeqCst)
                    || (w.reactor.has_sources() && !w.is_parked() && stranded(w)));
            if stalled {
                self.host_stalled(i);
            }
        }
        self.harvest_siblings(|w| {
            let our_wait_reports_it = from == RescueFrom::Idle && w.io_host.is(self.index);
            let look = worth_a_look_for_stranded_io(
                our_wait_reports_it,
                now.saturating_sub(w.reactor.last_polled()),
                w.is_known_blocked(),
            );
            let stranded = look && Reactor::maybe_ready(&w.poller);
            if stranded {
                w.reactor.note_polled(now);
            }
            stranded
        })
    }

    /// Harvests the poller of every sibling with IO sources that `pick` chooses, and queues
    /// what its events wake here. True if anything was woken.
    fn harvest_siblings(&self, pick: impl Fn(&WorkerSlot) -> bool) -> bool {
        let workers = &self.shared.workers;
        if workers.len() == 1 {
            return false;
        }
        let mut actions = EventActions::default();
        for (i, w) in workers.iter().enumerate() {
            if i == self.index || !w.has_io() || !pick(w) {
                continue;
            }
            if self.harvest(w, Some(Duration::ZERO), &mut actions) {
                super::pass_on_notification(w);
            }
        }
        let found = !actions.wakers.is_empty() || !actions.callbacks.is_empty();
        self.run_event_actions(actions);
        found
    }

    /// Fires the due timers of siblings that are late on them by more than the grace period.
    fn rescue_late_timers(&self) -> bool {
        let workers = &self.shared.workers;
        if workers.len() == 1 {
            return false;
        }
        let now = self.shared.clock.now();
        let now_nanos = self.slot().timers.nanos(now);
        let mut due = std::mem::take(&mut *self.due.borrow_mut());
        for (i, w) in workers.iter().enumerate() {
            let late = timers_are_late(w.timers.next_deadline_nanos(), now_nanos, self.rescues(w));
            if i != self.index && late {
                w.timers.try_take_due(now, &mut due);
            }
        }
        let found = !due.is_empty();
        self.dispatch_timers(&mut due);
        crate::timer::shrink_after_burst(&mut due);
        *self.due.borrow_mut() = due;
        found
    }

    /// Steals the whole ready queue of each awake sibling that has not finished a job since
    /// our previous look (at least `SIBLING_LOOK_INTERVAL` ago): it is in a long job, or its
    /// thread waits for a CPU. (Jobs, not `_run_once` cycles: one cycle of a
    /// busy worker runs thousands of jobs, and stealing from a worker that is merely busy
    /// only bounces tasks between caches.) With more runnable threads than cores a
    /// preempted worker waits a whole scheduler slice for its next turn, and
    /// its queued tasks would wait with it, since only idle workers steal otherwise. All of
    /// it, not half as an idle thief takes: a sibling that ran nothing for a whole interval
    /// is unlikely to run the other half within the next, and those jobs would wait for it.
    fn steal_from_stalled_siblings(&self) {
        let workers = &self.shared.workers;
        if workers.len() == 1 {
            return;
        }
        let mut seen = self.sibling_progress.borrow_mut();
        seen.resize(workers.len(), None);
        for (i, w) in workers.iter().enumerate() {
            let jobs = w.counters.tasks_polled.get() + w.counters.callbacks_run.get();
            let stalled = seen[i] == Some(jobs);
            seen[i] = Some(jobs);
            // Not its `burst_share` queue: a sibling that has just woken has not finished a
            // cycle since our last look either, and is about to take those itself.
            if i != self.index && stalled && !w.is_parked() {
                // The task its long job handed over to waits behind that job too.
                if let Some(job) = w.next.take() {
                    self.push_local(job);
                }
                self.steal_ready_queue_of(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_is_stranded_after_the_grace_or_at_once_when_its_worker_is_known_blocked() {
        let grace = STUCK_IO_GRACE.as_nanos() as u64;
        assert!(!io_is_stranded(0, false), "just harvested");
        assert!(
            !io_is_stranded(grace - 1, false),
            "a busy worker gets the grace"
        );
        assert!(io_is_stranded(grace, false));
        assert!(
            io_is_stranded(grace / 2, true),
            "a worker blocked in a system call will not harvest within the grace"
        );
    }

    #[test]
    fn an_epoll_nested_in_ours_is_looked_into_only_when_our_own_wait_is_not_next() {
        let grace = STUCK_IO_GRACE.as_nanos() as u64;
        assert!(worth_a_look_for_stranded_io(false, grace, false));
        assert!(worth_a_look_for_stranded_io(false, 0, true));
        assert!(!worth_a_look_for_stranded_io(false, grace - 1, false));
        assert!(
            !worth_a_look_for_stranded_io(true, 10 * grace, false),
            "our own wait reports its events"
        );
        assert!(!worth_a_look_for_stranded_io(true, 10 * grace, true));
    }

    #[test]
    fn a_burst_is_split_only_while_the_woken_sibling_is_still_waking_up() {
        assert!(should_share_burst(32, true));
        assert!(
            !should_share_burst(32, false),
            "a sibling that is up steals for itself"
        );
    }

    #[test]
    fn a_siblings_timers_are_late_after_the_grace_or_at_once_when_rescued() {
        let grace = STUCK_TIMER_GRACE.as_nanos() as u64;
        let due = 1_000_000;
        assert!(!timers_are_late(None, u64::MAX, true), "no timers");
        assert!(!timers_are_late(Some(due), due + grace - 1, false));
        assert!(timers_are_late(Some(due), due + grace, false));
        assert!(timers_are_late(Some(due), due, true), "rescued: no grace");
        assert!(!timers_are_late(Some(due), due - 1, true), "not due yet");
        assert!(
            !timers_are_late(Some(u64::MAX - 1), u64::MAX - 1, false),
            "no overflow"
        );
    }

    #[test]
    fn small_and_huge_bursts_are_not_split() {
        assert!(!should_share_burst(BURST_TO_SHARE - 1, true));
        assert!(should_share_burst(BURST_TO_SHARE, true));
        assert!(should_share_burst(BURST_SHARE_MAX, true));
        assert!(!should_share_burst(BURST_SHARE_MAX + 1, true));
    }
}
