//! A worker thread: one asyncio event loop over its own queues, stealing when idle.
//!
//! Each worker repeats asyncio's `_run_once` (see [`Worker::run_once`]):
//!
//! 1. **Tidy the timer heap** (asyncio's rebuild-or-pop rule, in `timer`).
//! 2. **Choose a timeout and wait for IO.** If something is ready (or a timer is due) the
//!    timeout is zero: the worker harvests IO, with one zero-timeout `epoll_wait`, only if it
//!    has sources (see `reactor`). Otherwise the worker first serves siblings stuck in a long
//!    job (their timers late by `shared::STUCK_TIMER_GRACE`, IO left for
//!    `reactor::STUCK_IO_GRACE`), takes back a burst share no sibling has taken yet, then
//!    searches (steal a batch from a random sibling, then from the global injector, then
//!    take the IO events of awake siblings); work found in any of these ways runs this
//!    cycle, after one zero-timeout harvest of the worker's own IO. Only when none finds
//!    anything does it park in one `epoll_wait` until its earliest timer, a notification or
//!    IO (the monitor wakes it for a stuck sibling). A worker with IO sources parks instead
//!    as a sibling's guest when it can: its epoll nested in the sibling's, itself asleep on
//!    an eventfd, so that one awake worker serves the IO of both (`handoff`). With a paused
//!    clock the last worker to go idle jumps the clock instead of sleeping (`clock`).
//! 3. **Move due timers** to the ready queue (callbacks) or wake their tasks (`sleep`).
//! 4. **Run exactly the jobs that were ready** when the phase began (pinned and stealable
//!    counted separately, taking turns: `run_order`). What they schedule runs next cycle, so
//!    one task that re-wakes itself cannot starve IO, timers or other tasks; one exception
//!    within the count: a task woken by the running job takes the next stealable turn, out
//!    of the next slot, at most `NEXT_RUNS_IN_A_ROW` times in a row (`next_slot`). Every
//!    `GLOBAL_QUEUE_INTERVAL` jobs the worker also takes one job from the global injector
//!    (Go's and tokio's fairness rule) and absorbs its pinned-task inbox; every
//!    `SIBLING_LOOK_CHECK_JOBS` jobs, at most every `SIBLING_LOOK_INTERVAL`, it also serves
//!    stuck siblings' late timers and stranded IO, and takes the queue of a sibling that
//!    stalled. If a burst queued here woke a sibling that is not up yet, the newer half of a
//!    large queue goes to that sibling first (`siblings`, "sharing a burst"); the rest runs
//!    here.
//!
//! Invariants:
//! * Only this thread pushes to or pops from `ready` (the `crossbeam_deque::Worker`) and
//!   `pinned`; siblings steal from `ready` through its `Stealer` and never see `pinned`.
//!   Only this thread fills its next slot; the monitor and siblings may empty it.
//! * `searching` mirrors this worker's share of the `Idle` searching count.
//! * Serving siblings never leaves this worker's own sockets unread for more than a cycle:
//!   a cycle that runs work found elsewhere harvests its own poller too, and one that finds
//!   nothing waits on it (or lends it to a host) unless work arrives as it parks.
//! * No user panic unwinds through this loop: callbacks run inside `catch_unwind`, and task
//!   cells contain panics of `poll` and of the future's destructor themselves.

mod guest;
pub(crate) mod handoff;
mod host_tally;
pub(crate) mod idle;
mod io_pace;
#[cfg(all(test, eddy_loom))]
mod loom_models;
pub(crate) mod monitor;
pub(crate) mod next_slot;
mod run_order;
pub(crate) mod schedule;
pub(crate) mod shared;
mod siblings;
pub(crate) mod spare;
#[cfg(test)]
mod tests;

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe, Location};
use std::rc::Rc;
use std::sync::atomic::{self, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_deque::Steal;

use crate::callback::Callback;
use crate::context;
use crate::contextvar;
use crate::exception::ExceptionContext;
use crate::hooks::ThreadHooks;
use crate::job::Job;
use crate::job::UnpackedJob;
use crate::reactor::epoll::RawEvents;
use crate::reactor::{EventActions, Harvest};
use crate::task::id::TaskId;
use crate::task::raw::Runnable;
use crate::timer::TimerAction;
use host_tally::GuestOnlyWakes;
use io_pace::IoPace;
use next_slot::NextRuns;
use run_order::{Maintenance, MaintenanceRhythm, RunOrder, Source};
use shared::{Shared, WorkerSlot};

/// Where a rescue of stuck siblings runs, which decides what it needs to look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RescueFrom {
    /// Phase 2 with nothing ready: our own harvest or wait follows at once.
    Idle,
    /// Between jobs of a long cycle (`look_after_busy_siblings`).
    BetweenJobs,
}

/// What one harvest of a poller found: its own notifier, its own events, its guests'.
struct Harvested {
    notified: bool,
    own_events: usize,
    guest_events: usize,
}

/// How long an exiting worker waits for its pinned tasks' in-flight wakes to arrive.
const PINNED_DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// The longest single park. Deadlines further away are re-evaluated after this.
const MAX_PARK: Duration = Duration::from_secs(3600);

/// Starts the thread of worker (or spare) `index`, named `name`, between the thread hooks.
pub(crate) fn spawn_thread(
    name: String,
    shared: &Arc<Shared>,
    index: usize,
    queue: crossbeam_deque::Worker<Job>,
    hooks: ThreadHooks,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let shared = shared.clone();
    std::thread::Builder::new().name(name).spawn(move || {
        let tid = monitor::thread_state::current_tid();
        shared.workers[index].tid.store(tid, SeqCst);
        crate::time_slice::request(shared.config.time_slice);
        hooks.wrap(&shared.handler, || {
            let worker = Rc::new(Worker::new(index, shared.clone(), queue));
            let run = worker.clone();
            // The loop contains every panic of user code; one that still gets out is ours,
            // and must not leave the runtime waiting for a thread that is gone.
            if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(move || run.run_thread())) {
                shared.worker_died(index, worker.is_searching(), payload);
            }
        });
        // Last: shutdown waits for this, so the stop hook has run by then.
        shared.worker_exited();
    })
}

/// What a worker about to sleep sees of work that may have been pushed at it meanwhile.
#[derive(Debug, Clone, Copy, Default)]
struct ParkCheck {
    /// Its pinned inbox holds wakes.
    inbox: bool,
    /// A sibling handed it part of a burst.
    burst_share: bool,
    /// The global injector holds jobs.
    injector: bool,
    /// Some worker searches for work (and so will take the injector's).
    someone_searching: bool,
    /// A waker took this worker off the parked list, counting it as searching: it is the
    /// searcher that `someone_searching` may be counting. Its notification cannot be relied
    /// on: a sibling that nests our epoll (a rescue) may have consumed it while we were not
    /// yet marked parked, and such a harvest passes on only what reaches a parked worker.
    woken: bool,
    closed: bool,
}

/// Whether a worker must not sleep: work arrived that its pusher may not have woken anyone
/// for, or a waker already counts it as searching. The injector counts only if nobody
/// searches: a searcher takes it, and a worker that was refused permission to search (half
/// the workers already do) would otherwise spin through its loop until the searcher got
/// there.
fn must_stay_awake(c: ParkCheck) -> bool {
    c.inbox || c.burst_share || (c.injector && !c.someone_searching) || c.woken || c.closed
}

/// The earlier of two optional deadlines (`None`: no deadline).
fn earlier(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    a.into_iter().chain(b).min()
}

/// Queued jobs from which on a push wakes a sibling (if nobody searches): one job is this
/// worker's own next step (a woken partner, an IO wake-up), and waking a sibling to steal it
/// would only add a cross-CPU round trip; a second one is work a sibling can take.
const SURPLUS_JOBS: usize = 2;

/// Whether `queued` jobs on a worker's ready queue, after a push, are worth waking a sibling
/// for.
fn is_surplus(queued: usize) -> bool {
    queued >= SURPLUS_JOBS
}

/// After a harvest of sibling `w`'s epoll consumed a notification meant for it: pass it on
/// if `w` sleeps (as a guest, or in its own epoll). An awake sibling needs none: before it
/// sleeps it looks again at everything a notification announces (`Worker::park`: queues,
/// and whether a waker took it off the parked list), and repeating it to an awake sibling
/// whose epoll we nest would only wake us again.
fn pass_on_notification(w: &WorkerSlot) {
    if w.is_parked() {
        w.notify();
    }
}

/// The thread-local half of a worker.
pub(crate) struct Worker {
    index: usize,
    /// A spare (`spare`): outside the idle bookkeeping.
    is_spare: bool,
    shared: Arc<Shared>,
    /// The ready queue: FIFO, stealable.
    ready: crossbeam_deque::Worker<Job>,
    /// Ready pinned (`spawn_local`) tasks: never stolen.
    pinned: RefCell<VecDeque<Runnable>>,
    /// When the next maintenance is due.
    rhythm: Cell<MaintenanceRhythm>,
    /// Whether this worker counts as searching in `Idle`.
    searching: Cell<bool>,
    /// xorshift state for choosing the first victim.
    rng: Cell<u64>,
    events: RefCell<RawEvents>,
    /// Scratch buffer for due timers, reused across cycles.
    due: RefCell<Vec<TimerAction>>,
    /// Set while IO events are being dispatched: pushes do not wake siblings.
    dispatching_io: Cell<bool>,
    /// IO events queued jobs during this cycle (see `stop_searching`).
    queued_io: Cell<bool>,
    /// The pace of jobs in cycles that harvested IO (`io_pace`).
    io_pace: Cell<IoPace>,
    /// When this worker last woke from a park.
    awake_since: Cell<Instant>,
    /// When a host may next look at its guests' epolls (`handoff`; timer-heap nanoseconds).
    next_guest_check: Cell<u64>,
    /// Our wake-ups in a row that served only guests' events (`host_tally::GuestOnlyWakes`).
    guest_only_wakes: Cell<GuestOnlyWakes>,
    /// Jobs each sibling had run at our last look, to spot one that stalled.
    sibling_progress: RefCell<Vec<Option<u64>>>,
    /// When a busy worker may next look after its siblings (see `siblings`).
    next_sibling_look: Cell<Instant>,
    /// The sibling that `push_local` woke for surplus work since our last phase 4.
    woken_for_surplus: Cell<Option<usize>>,
    /// The sibling we last handed part of a burst to (`siblings`), until we are idle.
    burst_shared_with: Cell<Option<usize>>,
    /// The job being run (`Job::addr`), 0 between jobs: a task it wakes runs next.
    running_job: Cell<usize>,
    /// How many jobs in a row came out of the next slot (`next_slot`).
    next_runs: Cell<NextRuns>,
}

impl Worker {
    pub(crate) fn new(
        index: usize,
        shared: Arc<Shared>,
        ready: crossbeam_deque::Worker<Job>,
    ) -> Self {
        Worker {
            index,
            is_spare: index >= shared.regular,
            shared,
            ready,
            pinned: RefCell::new(VecDeque::new()),
            rhythm: Cell::new(MaintenanceRhythm::default()),
            searching: Cell::new(false),
            rng: Cell::new(0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1)),
            events: RefCell::new(RawEvents::new()),
            due: RefCell::new(Vec::new()),
            dispatching_io: Cell::new(false),
            queued_io: Cell::new(false),
            io_pace: Cell::new(IoPace::default()),
            awake_since: Cell::new(Instant::now()),
            next_guest_check: Cell::new(0),
            guest_only_wakes: Cell::new(GuestOnlyWakes::default()),
            sibling_progress: RefCell::new(Vec::new()),
            next_sibling_look: Cell::new(Instant::now()),
            woken_for_surplus: Cell::new(None),
            burst_shared_with: Cell::new(None),
            running_job: Cell::new(0),
            next_runs: Cell::new(NextRuns::default()),
        }
    }

    pub(crate) fn index(&self) -> usize {
        self.index
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Whether this worker counts as searching in `Idle`.
    pub(crate) fn is_searching(&self) -> bool {
        self.searching.get()
    }

    fn slot(&self) -> &WorkerSlot {
        &self.shared.workers[self.index]
    }

    /// Queues a job on this worker and wakes a sibling to steal it if nobody is searching.
    #[inline]
    pub(crate) fn push_local(&self, job: Job) {
        self.ready.push(job);
        if self.dispatching_io.get() {
            return;
        }
        if is_surplus(self.ready.len()) {
            // The push, then the idle state: a parking sibling does the reverse (`Idle::list_parked`,
            // then its queue checks), so one of us sees the other.
            atomic::fence(SeqCst);
            if self.shared.idle.should_wake() {
                if let Some(woken) = self.wake_sibling() {
                    self.woken_for_surplus.set(Some(woken));
                }
            }
        }
    }

    /// Queues a stealable task woken on this worker. Woken by the job now running, and not
    /// that job itself (a task that yields goes to the back of the queue), it runs next, out
    /// of the next slot (`next_slot`), if the slot is free.
    pub(crate) fn push_woken(&self, job: Job) {
        let running = self.running_job.get();
        let job = if running != 0 && running != job.addr() {
            match self.slot().next.put(job) {
                Ok(()) => return,
                Err(job) => job,
            }
        } else {
            job
        };
        self.push_local(job);
    }

    /// Wakes a parked sibling for work this worker has found (surplus jobs, IO backlog),
    /// returning which one. Called only while this worker is off the parked list (`park`
    /// dispatches what its wait reported after `unpark_self`), so the worker woken is never
    /// this one, which would take the wake-up meant for a sibling.
    fn wake_sibling(&self) -> Option<usize> {
        let woken = self.shared.wake_idle();
        debug_assert_ne!(
            woken,
            Some(self.index),
            "a worker woke itself, not a sibling"
        );
        woken
    }

    /// Queues a pinned task on this worker.
    pub(crate) fn push_pinned(&self, runnable: Runnable) {
        self.pinned.borrow_mut().push_back(runnable);
    }

    /// The thread's whole life: loop until the runtime closes, then drop what is left.
    pub(crate) fn run_thread(self: Rc<Self>) {
        let _enter = context::enter_worker(self.clone());
        contextvar::defer_releases(true);
        while !self.shared.is_closed() {
            self.run_once();
        }
        self.drain_on_exit();
        // Off first: a destructor run by the last release may finish a task, whose context
        // must then be released at once, not held until the thread's locals are destroyed.
        contextvar::defer_releases(false);
        self.release_contexts();
    }

    /// One iteration of asyncio's `_run_once`.
    fn run_once(&self) {
        #[cfg(test)]
        if self.slot().fault.swap(false, SeqCst) {
            panic!("injected fault: worker {} dies", self.index);
        }
        self.slot().count_cycle();
        self.queued_io.set(false);
        // Phase 1: tidy the timer heap (no lock, no clock read when it is empty).
        let timers = &self.slot().timers;
        let next_timer = if timers.next_deadline_nanos().is_none() {
            None
        } else {
            timers.tidy()
        };

        // Phase 2: choose a timeout and wait for IO. Timeout 0 when anything is ready.
        self.take_inbox();
        let timer_due = next_timer.is_some_and(|t| t <= self.shared.clock.now());
        if self.has_ready() || timer_due {
            self.harvest_without_waiting();
        } else if self.rescue_stuck_siblings(RescueFrom::Idle)
            || self.reclaim_unclaimed_share()
            || self.find_work()
        {
            // Work found elsewhere (a stuck sibling's IO, a stolen batch) runs this cycle,
            // and the next cycle may find more of it the same way: our own sockets still get
            // their look now, or a worker serving a preempted sibling would leave them
            // waiting for as long as the sibling waits for a CPU.
            let found_io = self.queued_io.get();
            self.harvest_without_waiting();
            // What our harvest adds does not make a stolen batch an IO backlog: the cycle
            // is judged (`stop_searching`, the IO pace) by the work it went looking for.
            self.queued_io.set(found_io);
        } else {
            self.park(next_timer);
            // What a sibling handed us while we slept runs in this cycle.
            self.take_inbox();
        }

        // Phase 3: move due timers to the ready queue.
        self.fire_due_timers();

        // Phase 4: run what was ready when the phase began.
        if self.has_ready() {
            self.stop_searching();
        }
        self.share_burst_with_woken_sibling();
        // Timed only in IO cycles, whose harvest costs far more than two clock reads.
        let started = self.queued_io.get().then(Instant::now);
        let jobs = self.run_ready();
        if let Some(started) = started {
            self.note_io_pace(started.elapsed(), jobs);
        }
        self.release_contexts();
    }

    /// Releases the contexts of the tasks that finished in this cycle, in one go
    /// (`contextvar`, "Releasing task contexts in batches"). A value's destructor that panics
    /// goes to the exception handler, as it would have where the task finished.
    fn release_contexts(&self) {
        while let Err(payload) = panic::catch_unwind(contextvar::release_deferred) {
            // What a panic cut short is still held: go on releasing it.
            self.shared.report_context_drop_panic(payload);
        }
    }

    /// Harvests IO without blocking (one `epoll_wait`), if this worker has IO sources.
    fn harvest_without_waiting(&self) {
        let slot = self.slot();
        if !slot.has_io() {
            return;
        }
        slot.reactor.note_polled(slot.timers.nanos(Instant::now()));
        let mut actions = EventActions::default();
        self.harvest(slot, Some(Duration::ZERO), &mut actions);
        self.run_event_actions(actions);
    }

    /// One harvest of `slot`'s poller (ours or a stuck sibling's) into `actions`, counted on
    /// our metrics, followed by one of each guest epoll nested in it that reported events.
    /// True if `slot`'s own notifier fired.
    fn harvest(
        &self,
        slot: &WorkerSlot,
        timeout: Option<Duration>,
        actions: &mut EventActions,
    ) -> bool {
        self.harvest_counted(slot, timeout, actions).notified
    }

    /// `harvest`, saying how many events came from `slot`'s own sockets and how many from
    /// its guests'.
    fn harvest_counted(
        &self,
        slot: &WorkerSlot,
        timeout: Option<Duration>,
        actions: &mut EventActions,
    ) -> Harvested {
        let own = self.harvest_poller(slot, timeout, actions);
        let mut guest_events = 0;
        // One level: a guest's epoll holds no nested epoll, except for a moment after a
        // guest took its epoll back and became a host itself. Entries its harvest reports
        // then are dropped below; being level-triggered, they are reported again to whoever
        // waits on that epoll.
        let guests = std::mem::take(&mut actions.nested);
        for &g in &guests {
            let guest = &self.shared.workers[g];
            let theirs = self.harvest_poller(guest, Some(Duration::ZERO), actions);
            guest_events += theirs.events;
            if theirs.notified {
                pass_on_notification(guest);
            }
        }
        actions.nested.clear();
        Harvested {
            notified: own.notified,
            own_events: own.events,
            guest_events,
        }
    }

    fn harvest_poller(
        &self,
        slot: &WorkerSlot,
        timeout: Option<Duration>,
        actions: &mut EventActions,
    ) -> Harvest {
        let mut raw = self.events.borrow_mut();
        match slot
            .reactor
            .harvest(&slot.poller, &mut raw, timeout, actions)
        {
            Ok(h) => {
                self.slot().counters.io_events.add(h.events as u64);
                h
            }
            Err(e) => {
                self.report_wait_error(&e);
                Harvest::default()
            }
        }
    }

    /// Wakes the tasks and queues the fd callbacks that IO events asked for.
    ///
    /// Tasks woken by IO are queued here without waking siblings one by one: their sockets
    /// are registered with this worker, so they are best run here, and a sibling stealing
    /// them only bounces them between workers (each episode costs a park and a wake, seven
    /// system calls). Only a backlog (`io_backlog_is_surplus`) calls for a sibling.
    fn run_event_actions(&self, actions: EventActions) {
        if actions.wakers.is_empty() && actions.callbacks.is_empty() {
            return;
        }
        self.queued_io.set(true);
        self.dispatching_io.set(true);
        let handler = &self.shared.handler;
        for waker in actions.wakers {
            handler.contain("Exception in a waker woken by IO readiness", || {
                waker.wake()
            });
        }
        for due in actions.callbacks {
            let location = due.location;
            let cell = Callback::new(move || due.run(), location);
            self.push_local(Job::from(cell));
        }
        self.dispatching_io.set(false);
        if self.io_backlog_is_surplus() && self.shared.idle.should_wake() {
            self.wake_sibling();
        }
    }

    /// Whether the jobs queued here after an IO harvest are more than this worker should run
    /// alone (`io_pace`).
    fn io_backlog_is_surplus(&self) -> bool {
        let awake_for = self.awake_since.get().elapsed();
        self.io_pace
            .get()
            .backlog_is_surplus(self.ready.len(), awake_for)
    }

    /// Folds one IO cycle's phase 4 (`jobs` jobs in `took`) into the pace.
    fn note_io_pace(&self, took: Duration, jobs: usize) {
        let mut pace = self.io_pace.get();
        pace.note(took, jobs);
        self.io_pace.set(pace);
    }

    fn report_wait_error(&self, e: &std::io::Error) {
        if e.kind() != std::io::ErrorKind::Interrupted {
            tracing::error!("eddy worker {}: poller wait failed: {e}", self.index);
        }
    }

    fn has_ready(&self) -> bool {
        !self.ready.is_empty() || !self.slot().next.is_empty() || !self.pinned.borrow().is_empty()
    }

    /// Moves what other threads handed us into our queues: pinned tasks woken remotely, and
    /// the share of a burst that a sibling gave us when it woke us (`siblings`).
    fn take_inbox(&self) {
        let slot = self.slot();
        if !slot.burst_share.is_empty() {
            self.take_burst_share(&slot.burst_share);
        }
        let inbox = &slot.inbox;
        if inbox.is_empty() {
            return;
        }
        let mut pinned = self.pinned.borrow_mut();
        loop {
            match inbox.steal() {
                Steal::Success(r) => pinned.push_back(r),
                Steal::Retry => continue,
                Steal::Empty => break,
            }
        }
    }

    // ----- phase 2: searching and parking --------------------------------------------------

    /// Steals from a sibling, then from the injector, then takes the IO events waiting for
    /// busy siblings. Gives up at once if too many workers already search.
    fn find_work(&self) -> bool {
        // A spare searches whenever it is awake: it is up only because workers are stuck.
        if !self.searching.get() && !self.is_spare {
            if !self.shared.idle.try_start_searching() {
                return false;
            }
            self.searching.set(true);
        }
        self.steal_from_siblings() || self.steal_from_injector() || self.harvest_awake_siblings()
    }

    fn steal_from_injector(&self) -> bool {
        loop {
            match self.shared.injector.steal_batch(&self.ready) {
                Steal::Success(()) => return true,
                Steal::Retry => continue,
                Steal::Empty => return false,
            }
        }
    }

    fn stop_searching(&self) {
        if !self.searching.replace(false) || !self.shared.idle.stop_searching() {
            return;
        }
        // Jobs that IO queued here are this worker's next steps, as in `run_event_actions`: only a
        // backlog of them is surplus. (Counting every pair as surplus made a server's two
        // workers wake each other thousands of times a second.)
        let surplus = if self.queued_io.get() {
            self.io_backlog_is_surplus()
        } else {
            self.ready.len() > 1
        };
        if surplus || !self.shared.injector.is_empty() {
            // The last searcher found more work than it can start at once: wake another.
            self.wake_sibling();
        }
    }

    fn next_random(&self) -> u64 {
        let mut x = self.rng.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.set(x);
        x
    }

    /// Sleeps in `epoll_wait` until our next timer, IO or a notification. With a paused
    /// clock, the last worker to go idle jumps the clock instead (see `clock`). Siblings stuck
    /// in a long job are not watched from here: the monitor wakes us for them.
    fn park(&self, next_timer: Option<Instant>) {
        let slot = self.slot();
        let shared = &*self.shared;
        let paused = shared.clock.is_paused();
        let was_searching = self.searching.replace(false);
        if !self.is_spare
            && shared.idle.list_parked(self.index, was_searching)
            && shared.has_stealable_work()
        {
            // We were the last searcher and work arrived meanwhile: make sure someone looks.
            shared.wake_idle();
        }
        let mut deadline = next_timer.map(|t| slot.timers.nanos(t));
        slot.mark_parked();
        // See `mark_parked`: after the fence, whatever a pusher that saw us awake pushed is
        // visible to the reads below.
        atomic::fence(SeqCst);
        // A timer pushed onto our heap after phase 1 saw us awake and did not notify us.
        deadline = earlier(deadline, slot.timers.next_deadline_nanos());
        // The timers of siblings we rescue from a long job are ours to fire on time.
        if !paused && slot.hosted.load(SeqCst) != 0 {
            for w in shared.workers.iter().filter(|w| self.rescues(w)) {
                deadline = earlier(deadline, w.timers.next_deadline_nanos());
            }
        }
        // Work pushed at us while we decided to sleep: its pusher may have seen us awake.
        let work_arrived = must_stay_awake(ParkCheck {
            inbox: !slot.inbox.is_empty(),
            burst_share: !slot.burst_share.is_empty(),
            injector: !shared.injector.is_empty(),
            someone_searching: shared.idle.anyone_searching(),
            woken: !self.is_spare && !shared.idle.is_listed(self.index),
            closed: shared.is_closed(),
        });
        let mut actions = EventActions::default();
        let time_jumped = !work_arrived && paused && self.auto_advance();
        if !work_arrived && !time_jumped {
            // With a paused clock, timers are due when a jump makes them so, not with time.
            let timeout = deadline.filter(|_| !paused).map(|deadline| {
                let now = slot.timers.nanos(shared.clock.now());
                Duration::from_nanos(deadline.saturating_sub(now)).min(MAX_PARK)
            });
            actions = self.wait_and_harvest(timeout);
        } else {
            // Counted as parked until `unpark_self`: a sibling deciding a jump must know.
            shared.clock.note_wake();
        }
        slot.mark_awake();
        if !self.is_spare && shared.idle.unpark_self(self.index) {
            // Someone woke us on purpose and counted us as searching.
            self.searching.set(true);
        }
        self.run_event_actions(actions);
        // After `unpark_self`: the monitor decides to sleep by "every worker is parked".
        shared.monitor.worker_awake();
    }

    /// Blocks in our poller; returns what it reported, for the caller to dispatch once it is
    /// off the parked list (a push made while still on it could wake this very worker).
    fn wait_and_harvest(&self, timeout: Option<Duration>) -> EventActions {
        let slot = self.slot();
        let counters = &slot.counters;
        let parked_at = Instant::now();
        // Before the count: a snapshot that counts this park also leaves it out of
        // `busy_time`.
        counters.park_begins(parked_at);
        counters.parks.add(1);
        let mut actions = EventActions::default();
        // Asleep as a sibling's guest, our epoll still has to be harvested once on waking.
        let timeout = if self.park_as_guest(timeout) {
            Some(Duration::ZERO)
        } else {
            timeout
        };
        let harvested = self.harvest_counted(slot, timeout, &mut actions);
        self.guest_only_wakes.set(
            self.guest_only_wakes
                .get()
                .after_wake(harvested.own_events, harvested.guest_events),
        );
        self.shared.clock.note_wake();
        let woke_at = Instant::now();
        self.awake_since.set(woke_at);
        counters.park_ends(parked_at, woke_at);
        counters.wakeups.add(1);
        slot.mark_awake();
        slot.reactor.note_polled(slot.timers.nanos(woke_at));
        actions
    }

    /// Paused clock: if every worker is idle with nothing queued, the blocking pool has
    /// nothing to do and no `block_on` thread is awake, jumps the clock to the earliest timer
    /// deadline of any heap and wakes the workers whose timers are then due. True if the
    /// clock moved (we must not sleep then).
    fn auto_advance(&self) -> bool {
        let shared = &*self.shared;
        let mut earliest = None;
        let jumped = shared.clock.jump_if_quiet(|| {
            let quiet = shared.every_loop_parked()
                && shared.blocking.is_idle()
                && shared.block_ons_awake.load(SeqCst) == 0
                && shared.injector.is_empty()
                && shared.workers.iter().all(|w| {
                    w.inbox.is_empty()
                        && w.stealer.is_empty()
                        && w.next.is_empty()
                        && w.burst_share.is_empty()
                });
            if !quiet {
                return None;
            }
            earliest = shared
                .workers
                .iter()
                .filter_map(|w| w.timers.next_deadline_nanos())
                .min();
            earliest.map(|nanos| self.slot().timers.instant_of(nanos))
        });
        let Some(earliest) = earliest.filter(|_| jumped) else {
            return false;
        };
        for (i, w) in shared.workers.iter().enumerate() {
            if i != self.index
                && w.timers
                    .next_deadline_nanos()
                    .is_some_and(|d| d <= earliest)
            {
                w.notify();
            }
        }
        true
    }

    // ----- phase 3: timers ----------------------------------------------------------------

    fn fire_due_timers(&self) {
        let timers = &self.slot().timers;
        if timers.next_deadline_nanos().is_none() {
            return;
        }
        let mut due = std::mem::take(&mut *self.due.borrow_mut());
        timers.take_due(self.shared.clock.now(), &mut due);
        self.dispatch_timers(&mut due);
        crate::timer::shrink_after_burst(&mut due);
        *self.due.borrow_mut() = due;
    }

    fn dispatch_timers(&self, due: &mut Vec<TimerAction>) {
        if due.is_empty() {
            return;
        }
        self.slot().counters.timers_fired.add(due.len() as u64);
        let handler = &self.shared.handler;
        for action in due.drain(..) {
            match action {
                TimerAction::Callback(c) => self.push_local(Job::from(c)),
                TimerAction::Wake(s) => {
                    handler.contain("Exception in a waker woken by a timer", || s.fire());
                }
            }
        }
    }

    // ----- phase 4: running ---------------------------------------------------------------

    /// Runs the jobs that are ready now, in [`RunOrder`]; returns how many ran.
    fn run_ready(&self) -> usize {
        let next = usize::from(!self.slot().next.is_empty());
        let mut order = RunOrder::new(self.pinned.borrow().len(), self.ready.len() + next);
        let mut ran = 0;
        while let Some(source) = order.next() {
            if self.shared.is_closed() {
                return ran;
            }
            // Before taking our next job, not after: `maintenance` may run a job from the
            // injector, and one that blocks for long must not strand a job we took out of the
            // ready queue, where siblings can no longer steal it.
            match self.maintenance_due() {
                Maintenance::None => {}
                // Between maintenances too: a sibling preempted after its harvest holds the
                // jobs it queued until someone looks (`siblings`).
                Maintenance::SiblingLook => self.look_after_busy_siblings(),
                Maintenance::Full => self.maintenance(),
            }
            let job = match source {
                Source::Pinned => self.pinned.borrow_mut().pop_front().map(Job::from),
                Source::Ready => {
                    let job = self.next_stealable_job();
                    if job.is_none() {
                        order.ready_ran_out();
                    }
                    job
                }
            };
            let Some(job) = job else { continue };
            self.run_job(job);
            ran += 1;
            self.wake_guests_if_we_lag();
        }
        ran
    }

    /// Phase 4's next stealable job: the task the previous job handed over to, unless the
    /// slot has had its turns in a row (`NextRuns`), else the oldest in the ready queue.
    fn next_stealable_job(&self) -> Option<Job> {
        let next = &self.slot().next;
        let mut runs = self.next_runs.get();
        let from_slot = if runs.slot_may_run() {
            next.take()
        } else {
            None
        };
        let job = if from_slot.is_some() {
            runs.ran_from_slot();
            from_slot
        } else {
            runs.ran_from_queue();
            self.ready.pop().or_else(|| next.take())
        };
        self.next_runs.set(runs);
        job
    }

    /// Counts a job about to run; says what comes first (`MaintenanceRhythm`).
    fn maintenance_due(&self) -> Maintenance {
        let mut rhythm = self.rhythm.get();
        let due = rhythm.before_next_job();
        self.rhythm.set(rhythm);
        due
    }

    /// Every [`GLOBAL_QUEUE_INTERVAL`](run_order::GLOBAL_QUEUE_INTERVAL) jobs: one job from
    /// the injector (so it is never starved by a busy local queue), the pinned inbox, and (at
    /// most every `SIBLING_LOOK_INTERVAL`) late sibling timers, stranded sibling IO and all
    /// the queue of a sibling that stalled.
    fn maintenance(&self) {
        self.take_inbox();
        self.look_after_busy_siblings();
        if self.shared.injector.is_empty() {
            return;
        }
        loop {
            match self.shared.injector.steal_batch_and_pop(&self.ready) {
                Steal::Success(job) => return self.run_job(job),
                Steal::Retry => continue,
                Steal::Empty => return,
            }
        }
    }

    fn run_job(&self, job: Job) {
        self.running_job.set(job.addr());
        self.run_unpacked(job);
        self.running_job.set(0);
    }

    /// `run_job`'s body: polls or runs the job, each containing panics of user code.
    fn run_unpacked(&self, job: Job) {
        let start = self.shared.config.debug.then(Instant::now);
        match job.unpack() {
            UnpackedJob::Task(runnable) => {
                // Read before the poll, which may free the task; only in debug mode, as the
                // id and location sit in the cell's cold bytes (`raw::Header`).
                let named = start.map(|start| {
                    let meta = runnable.meta();
                    (start, meta.id, meta.location)
                });
                // The task cell contains panics of `poll` and of the future's destructor.
                self.slot().counters.tasks_polled.add(1);
                runnable.run();
                if let Some((start, id, location)) = named {
                    self.report_if_slow(start, "task", location, Some(id));
                }
            }
            UnpackedJob::Callback(cb) => {
                if cb.cancelled() {
                    return;
                }
                self.slot().counters.callbacks_run.add(1);
                if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| cb.run())) {
                    let ctx = ExceptionContext::new("Exception in callback")
                        .with_panic(&*payload)
                        .with_location(cb.location());
                    self.shared.handler.call(&ctx);
                    crate::exception::drop_payload(payload);
                }
                if let Some(start) = start {
                    self.report_if_slow(start, "callback", cb.location(), None);
                }
            }
        }
    }

    #[cold]
    fn report_if_slow(
        &self,
        start: Instant,
        what: &str,
        location: &'static Location<'static>,
        task: Option<TaskId>,
    ) {
        let took = start.elapsed();
        if took >= self.shared.config.slow_callback_duration {
            tracing::warn!(
                target: "eddy::slow_callback",
                worker = self.index,
                task = task.map(TaskId::as_u64),
                location = %location,
                seconds = took.as_secs_f64(),
                "Executing {what} scheduled at {location} took {:.3} seconds",
                took.as_secs_f64()
            );
        }
    }

    // ----- shutdown -----------------------------------------------------------------------

    /// Drops everything this worker still owns. Pinned tasks must be dropped here, on their
    /// own thread, so we wait for each one still registered to reach us: a task whose wake
    /// is in flight from another thread (state already "scheduled", runnable not yet in our
    /// inbox) arrives within moments. Only after `PINNED_DRAIN_LIMIT` do we give up on
    /// stragglers (`Shared::schedule_pinned` then leaks them rather than drop a `!Send` future
    /// on a foreign thread). One more drain after publishing `exited` catches every push to
    /// our inbox or `burst_share` queue that did not see the flag (`Shared::schedule_pinned` and
    /// `share_burst_with_woken_sibling` hold the other half of this handshake).
    fn drain_on_exit(&self) {
        let owner = Some(self.index as u32);
        let registry = &self.shared.registry;
        let give_up = Instant::now() + PINNED_DRAIN_LIMIT;
        loop {
            for waker in registry.wakers_of(owner) {
                waker.wake();
            }
            self.drain_owned();
            if registry.count_of(owner) == 0 || Instant::now() >= give_up {
                break;
            }
            std::thread::yield_now();
        }
        self.slot().exited.store(true, SeqCst);
        std::sync::atomic::fence(SeqCst);
        self.drain_owned();
        for waker in registry.take(owner) {
            waker.wake();
        }
        self.drain_owned();
    }

    /// Discards queued jobs and runs queued pinned tasks (which, the runtime being closed,
    /// only drop their futures) until nothing is left.
    fn drain_owned(&self) {
        loop {
            // First: what the inbox and `burst_share` hold lands in the queues emptied below.
            self.take_inbox();
            let mut did_something = false;
            while let Some(job) = self.slot().next.take().or_else(|| self.ready.pop()) {
                job.discard();
                did_something = true;
            }
            loop {
                let next = self.pinned.borrow_mut().pop_front();
                let Some(r) = next else { break };
                r.run();
                did_something = true;
            }
            if !did_something {
                break;
            }
        }
    }
}
