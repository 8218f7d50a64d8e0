//! Runtime-wide state. [`Shared`] is what all workers, handles and task cells of one runtime
//! point to; the paths by which work enters a worker are in `schedule`. It owns:
//!
//! * one [`WorkerSlot`] per worker: the `Stealer` of its ready queue, its `Poller` (used to
//!   park and to be woken), its timer heap, the inbox for its pinned tasks, and the jobs a
//!   sibling handed it when it woke it for a burst;
//! * the global `Injector`, fed by threads that are not workers of this runtime;
//! * the idle bookkeeping ([`Idle`]) that decides whom to wake;
//! * the task registry, exception handler and configuration.
//!
//! Shutdown: `close` sets `closed`, wakes every worker, and later `drain` empties what no
//! worker owns. A submitter that loses the race with shutdown drains what it pushed itself,
//! so nothing is stranded in a queue of a dead runtime (which would also leak it: queued
//! tasks point back to `Shared`).

use std::any::Any;
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{self, AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_deque::{Injector, Steal, Stealer};
use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};
use polling::Poller;

use super::guest::{IoHost, ParkFd};
use super::idle::Idle;
use super::monitor::state::MonitorState;
use super::next_slot::NextSlot;
use super::spare::Spares;
use crate::blocking::pool::BlockingPool;
use crate::clock::Clock;
use crate::exception::{ExceptionContext, ExceptionHandler};
use crate::job::Job;
use crate::metrics::counters::WorkerCounters;
use crate::reactor::Reactor;
use crate::task::host::TaskHost;
use crate::task::raw::Header;
use crate::task::raw::Runnable;
use crate::task::registry::TaskRegistry;
use crate::timer::{TimerAction, TimerQueue};

/// How long past its deadline a timer may wait for its own (busy) worker before a sibling
/// fires it. Siblings check about this often while a worker is busy, which bounds the
/// lateness of timers on a stuck worker to a few milliseconds, well inside the 10 ms the
/// design asks for.
pub(crate) const STUCK_TIMER_GRACE: Duration = Duration::from_millis(2);

/// What the runtime's tasks need of it (`task::host`).
impl TaskHost for Arc<Shared> {
    fn register(&self, task: NonNull<Header>, name: Option<String>) {
        self.registry.register(task, name);
    }

    fn unregister(&self, task: NonNull<Header>) {
        self.registry.unregister(task);
    }

    fn handler(&self) -> &ExceptionHandler {
        &self.handler
    }

    fn next_task_id(&self) -> u64 {
        Shared::next_task_id(self)
    }

    fn is_stopping(&self) -> bool {
        Shared::is_stopping(self)
    }

    fn report_context_drop_panic(&self, payload: Box<dyn Any + Send>) {
        Shared::report_context_drop_panic(self, payload)
    }
}

/// Settings fixed at build time.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) debug: bool,
    pub(crate) slow_callback_duration: Duration,
    pub(crate) run_shutdown_timeout: Duration,
    /// The scheduler slice the runtime's own threads ask the kernel for (`time_slice`).
    pub(crate) time_slice: Option<Duration>,
}

/// The parts of one worker that other threads may touch.
#[derive(Debug)]
pub(crate) struct WorkerSlot {
    pub(crate) stealer: Stealer<Job>,
    pub(crate) poller: Poller,
    /// The IO sources registered with `poller`.
    pub(crate) reactor: Reactor,
    pub(crate) timers: Arc<TimerQueue>,
    /// Pinned tasks woken from other threads, waiting to be moved to the owner's queue.
    pub(crate) inbox: Injector<Runnable>,
    /// Fresh jobs of a burst that a sibling woke this worker for and handed over before it
    /// was up (`worker::siblings`): the owner takes them first thing, idle siblings may
    /// steal them like the ready queue.
    pub(crate) burst_share: Injector<Job>,
    /// The task the job running on this worker handed over to (`next_slot`): the owner runs
    /// it next; the monitor and siblings take it out if the worker is stuck.
    pub(crate) next: NextSlot,
    /// Set from just before the worker's last look at its queues until it is awake again:
    /// a pusher that sees it clear knows the worker will see the push without a notification.
    parked: AtomicBool,
    /// What the worker counts about itself (metrics); written by that worker only.
    pub(crate) counters: CachePadded<WorkerCounters>,
    /// `_run_once` cycles completed; the monitor reads it to spot a worker stuck in one job.
    cycles: AtomicU64,
    /// The worker thread's id (`gettid`), 0 until the thread runs: the monitor reads its
    /// state in `/proc` (`monitor::thread_state`).
    pub(crate) tid: AtomicI32,
    /// The cycle in which the monitor last found the thread blocked in a job (asleep in the
    /// kernel outside its park), 0 if never: while the worker is still in that cycle, a
    /// sibling serves its IO without waiting out `reactor::STUCK_IO_GRACE`.
    blocked_in_cycle: AtomicU64,
    /// Set by the worker after its final drain on shutdown: pinned tasks can no longer be
    /// dropped on their thread.
    pub(crate) exited: AtomicBool,
    /// Set when the worker's thread died (a bug of ours): siblings adopt its queue, timers
    /// and sockets for good (`Shared::worker_died`).
    pub(crate) dead: AtomicBool,
    /// Tests only: makes the worker's loop panic at its next cycle, as a bug of ours would.
    #[cfg(test)]
    pub(crate) fault: AtomicBool,
    /// What a worker parked as a guest sleeps on instead of its epoll (`worker::handoff`).
    pub(crate) park_fd: ParkFd,
    /// The sibling whose epoll holds ours, if any: while we sleep as its guest, or
    /// from the moment it found us stalled in a long job until our next park
    /// (`worker::handoff`).
    pub(crate) io_host: IoHost,
    /// Set while the worker sleeps on `park_fd` as a guest: notifications go there then.
    pub(crate) guest_asleep: AtomicBool,
    /// How many siblings' epolls are nested in ours.
    pub(crate) hosted: AtomicUsize,
}

impl WorkerSlot {
    pub(crate) fn new(stealer: Stealer<Job>, epoch: Instant) -> std::io::Result<Self> {
        Ok(WorkerSlot {
            stealer,
            poller: Poller::new()?,
            reactor: Reactor::new(),
            timers: Arc::new(TimerQueue::new(epoch)),
            inbox: Injector::new(),
            burst_share: Injector::new(),
            next: NextSlot::new(),
            parked: AtomicBool::new(false),
            exited: AtomicBool::new(false),
            dead: AtomicBool::new(false),
            #[cfg(test)]
            fault: AtomicBool::new(false),
            cycles: AtomicU64::new(0),
            tid: AtomicI32::new(0),
            blocked_in_cycle: AtomicU64::new(0),
            counters: CachePadded::new(WorkerCounters::new()),
            park_fd: ParkFd::new()?,
            io_host: IoHost::none(),
            guest_asleep: AtomicBool::new(false),
            hosted: AtomicUsize::new(0),
        })
    }

    /// Counts one more cycle (the owning worker only: a plain store).
    #[inline]
    pub(crate) fn count_cycle(&self) {
        let n = self.cycles.load(Ordering::Relaxed);
        self.cycles.store(n.wrapping_add(1), Ordering::Relaxed);
    }

    pub(crate) fn cycles(&self) -> u64 {
        self.cycles.load(Ordering::Relaxed)
    }

    /// The monitor found the thread blocked in a job during cycle `cycle` (as read before
    /// the check: if the worker has moved on since, the mark is stale from the start).
    pub(crate) fn mark_blocked(&self, cycle: u64) {
        self.blocked_in_cycle.store(cycle, Ordering::Relaxed);
    }

    /// Whether the monitor found the thread blocked in the cycle it is still in. A worker
    /// that has moved on (its counter advanced) is no longer known to be blocked. A hint,
    /// read without ordering: a stale answer only makes a rescuer wait out the IO grace, or
    /// nest the epoll of a worker that has just returned from its job (which it takes back
    /// at its next park).
    pub(crate) fn is_known_blocked(&self) -> bool {
        let marked = self.blocked_in_cycle.load(Ordering::Relaxed);
        marked != 0 && marked == self.cycles()
    }

    /// Something a sibling could serve if this worker is stuck: queued jobs, pinned wakes,
    /// timers, or IO sources (its own or its guests').
    pub(crate) fn has_pending_work(&self) -> bool {
        !self.stealer.is_empty()
            || !self.next.is_empty()
            || !self.burst_share.is_empty()
            || self.timers.next_deadline_nanos().is_some()
            || self.has_io()
    }

    /// Whether this worker's epoll has anything to watch: sources, or guests' epolls.
    #[inline]
    pub(crate) fn has_io(&self) -> bool {
        self.reactor.has_sources() || self.hosted.load(Ordering::Relaxed) != 0
    }

    pub(crate) fn is_parked(&self) -> bool {
        self.parked.load(Ordering::SeqCst)
    }

    /// The worker is about to look at its queues one last time before it sleeps. Pushers
    /// store, fence, then read `parked`; the worker stores it, fences, then reads what they
    /// push (timer heaps, queues): one of the two sees the other.
    pub(crate) fn mark_parked(&self) {
        self.parked.store(true, Ordering::SeqCst);
    }

    /// The worker is awake: pushes reach it without a notification.
    pub(crate) fn mark_awake(&self) {
        self.parked.store(false, Ordering::SeqCst);
    }

    /// Wakes the worker from its park (or makes its next wait return at once): an eventfd
    /// write, `Poller::notify`'s or, while the worker sleeps as a sibling's guest, that of
    /// its `park_fd` (see `worker::handoff`).
    pub(crate) fn notify(&self) {
        if self.guest_asleep.load(Ordering::SeqCst) {
            self.park_fd.wake();
            return;
        }
        if let Err(e) = self.poller.notify() {
            tracing::error!("failed to wake an eddy worker: {e}");
        }
    }
}

/// Takes everything out of a queue with `steal` and hands each item to `dispose`.
fn drain_queue<T>(mut steal: impl FnMut() -> Steal<T>, mut dispose: impl FnMut(T)) {
    loop {
        match steal() {
            Steal::Success(item) => dispose(item),
            Steal::Retry => continue,
            Steal::Empty => break,
        }
    }
}

/// State shared by everything that belongs to one runtime.
pub(crate) struct Shared {
    /// The workers (`0..regular`), then the spares (`worker::spare`).
    pub(crate) workers: Box<[WorkerSlot]>,
    /// How many of `workers` are workers proper; the rest are spares.
    pub(crate) regular: usize,
    pub(crate) spares: Spares,
    pub(crate) injector: Injector<Job>,
    pub(crate) idle: Idle,
    pub(crate) registry: TaskRegistry,
    pub(crate) monitor: MonitorState,
    pub(crate) blocking: BlockingPool,
    pub(crate) handler: ExceptionHandler,
    pub(crate) config: Config,
    /// Shared with `block_on` wakers, which count wake-ups for the paused clock.
    pub(crate) clock: Arc<Clock>,
    /// Serialises `add_reader`/`remove_reader` & co., which look up an fd across workers.
    pub(crate) fd_watch_lock: Mutex<()>,
    /// Serialises IO hand-offs between workers (`worker::handoff`).
    pub(crate) handoff: Mutex<()>,
    /// `block_on` threads running or woken (see `runtime::ThreadWaker`); a paused clock
    /// jumps only while this is zero.
    pub(crate) block_ons_awake: Arc<AtomicUsize>,
    closed: AtomicBool,
    /// Set by `close` and by `cancel_all_tasks`: every task stops at its next poll.
    stopping: AtomicBool,
    /// Written by every spawn, so kept off the cache line of the flags above, which every
    /// poll reads.
    next_task_id: CachePadded<AtomicU64>,
    /// Round-robin choice of heap for timers scheduled from outside the workers.
    pub(super) next_remote_home: AtomicUsize,
    /// `run_forever` waits here for `stop()`.
    stop: Mutex<bool>,
    stop_cv: Condvar,
    /// Workers that have left their loop; shutdown waits on it.
    exited: Mutex<usize>,
    exited_cv: Condvar,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("workers", &self.workers.len())
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// `workers`: the slots of the `regular` workers, then those of the spares that `spares`
    /// holds the queues of.
    pub(crate) fn new(
        workers: Box<[WorkerSlot]>,
        spares: Spares,
        handler: ExceptionHandler,
        config: Config,
        blocking: BlockingPool,
        clock: Clock,
        monitor: MonitorState,
    ) -> Self {
        let regular = workers.len() - spares.count();
        Shared {
            workers,
            regular,
            spares,
            injector: Injector::new(),
            idle: Idle::new(regular),
            registry: TaskRegistry::new(),
            monitor,
            blocking,
            handler,
            config,
            clock: Arc::new(clock),
            fd_watch_lock: Mutex::new(()),
            handoff: Mutex::new(()),
            block_ons_awake: Arc::new(AtomicUsize::new(0)),
            closed: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            next_task_id: CachePadded::new(AtomicU64::new(1)),
            next_remote_home: AtomicUsize::new(0),
            stop: Mutex::new(false),
            stop_cv: Condvar::new(),
            exited: Mutex::new(0),
            exited_cv: Condvar::new(),
        }
    }

    /// A runtime with no workers, for unit tests that drive tasks and callbacks by hand (and
    /// run under Miri, which cannot create a `Poller`).
    #[cfg(test)]
    pub(crate) fn for_tests() -> Arc<Shared> {
        let config = Config {
            debug: false,
            slow_callback_duration: Duration::from_millis(100),
            run_shutdown_timeout: Duration::from_secs(1),
            time_slice: None,
        };
        let pool = BlockingPool::new(
            1,
            Duration::from_secs(1),
            "t".into(),
            crate::hooks::ThreadHooks::default(),
        );
        let clock = Clock::new(Instant::now(), false);
        Arc::new(Shared::new(
            Box::new([]),
            Spares::new(Vec::new(), "t".into(), crate::hooks::ThreadHooks::default()),
            ExceptionHandler::new(None),
            config,
            pool,
            clock,
            MonitorState::default(),
        ))
    }

    pub(crate) fn next_task_id(&self) -> u64 {
        self.next_task_id.fetch_add(1, Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Every worker and every spare whose thread started is parked. Spares stay off the idle
    /// bookkeeping, so `Idle::all_parked` alone would miss a spare running a job.
    pub(crate) fn every_loop_parked(&self) -> bool {
        let started = self.regular..self.regular + self.spares.started();
        self.idle.all_parked() && self.workers[started].iter().all(WorkerSlot::is_parked)
    }

    /// True once every task is to stop at its next poll (closing, or `eddy::run` ending).
    #[inline]
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Reports a context value whose destructor panicked while a worker released finished
    /// tasks' contexts (`contextvar::release_later`): which task held it last is not known
    /// there, so the report names none.
    pub(crate) fn report_context_drop_panic(&self, payload: Box<dyn std::any::Any + Send>) {
        let message = if self.is_stopping() {
            "unhandled error during shutdown: a task's context panicked while being dropped"
        } else {
            "Exception while dropping a task's context"
        };
        let ctx = crate::exception::ExceptionContext::new(message).with_panic(&*payload);
        self.handler.call(&ctx);
        crate::exception::drop_payload(payload);
    }

    /// asyncio.run's `_cancel_all_tasks`: every task, idle or not, stops at its next poll
    /// (its future is dropped), and idle ones are woken to get there.
    pub(crate) fn cancel_all_tasks(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        for waker in self.registry.wakers() {
            waker.wake();
        }
    }

    // ----- run_forever / stop -------------------------------------------------------------

    pub(crate) fn stop(&self) {
        *self.stop.lock() = true;
        self.stop_cv.notify_all();
    }

    /// Blocks until `stop()` was called, then clears the request.
    pub(crate) fn wait_for_stop(&self) {
        let mut stopped = self.stop.lock();
        while !*stopped {
            self.stop_cv.wait(&mut stopped);
        }
        *stopped = false;
    }

    // ----- shutdown -----------------------------------------------------------------------

    /// Marks the runtime closed and wakes every worker so that it leaves its loop.
    pub(crate) fn close(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.closed.store(true, Ordering::SeqCst);
        self.spares.close();
        atomic::fence(Ordering::SeqCst);
        for w in self.workers.iter() {
            w.notify();
        }
        self.monitor.shutdown();
    }

    /// Worker `index`'s thread unwound out of its loop (a bug of ours, `payload` its panic):
    /// reports it and lets the others carry on without it. It no longer counts as awake or
    /// searching and is never woken; its pinned tasks can no longer run (their wakes are
    /// dropped, as after an exit); its stealable queue, timer heap and sockets stay in its
    /// slot, where siblings serve them as they serve a worker stuck in a long job, which
    /// is what it now looks like to them. Shutdown then counts it as exited.
    pub(crate) fn worker_died(
        &self,
        index: usize,
        was_searching: bool,
        payload: Box<dyn Any + Send>,
    ) {
        let slot = &self.workers[index];
        slot.dead.store(true, Ordering::SeqCst);
        slot.exited.store(true, Ordering::SeqCst);
        slot.mark_awake();
        if index < self.regular {
            self.idle.retire(index, was_searching);
        }
        let ctx = ExceptionContext::new(format!(
            "eddy worker {index} died (a bug in eddy); its siblings go on serving its tasks, \
             timers and sockets"
        ))
        .with_panic(&*payload);
        self.handler.call(&ctx);
        crate::exception::drop_payload(payload);
        // A parked sibling may be the only one left: make sure someone looks.
        for (i, w) in self.workers.iter().enumerate() {
            if i != index && w.is_parked() {
                w.notify();
                break;
            }
        }
    }

    /// Called by each worker thread as its very last action.
    pub(crate) fn worker_exited(&self) {
        *self.exited.lock() += 1;
        self.exited_cv.notify_all();
    }

    /// Waits until every worker left its loop, or until `deadline`. True if all did.
    /// The runtime must be closed (so no more spares start).
    pub(crate) fn wait_workers_exited(&self, deadline: Option<Instant>) -> bool {
        debug_assert!(self.is_closed());
        let threads = self.regular + self.spares.started();
        let mut exited = self.exited.lock();
        while *exited < threads {
            match deadline {
                None => self.exited_cv.wait(&mut exited),
                Some(d) => {
                    if self.exited_cv.wait_until(&mut exited, d).timed_out() {
                        return *exited == threads;
                    }
                }
            }
        }
        true
    }

    pub(super) fn drain_injector(&self) {
        loop {
            match self.injector.steal() {
                Steal::Success(job) => job.discard(),
                Steal::Retry => continue,
                Steal::Empty => break,
            }
        }
    }

    /// Drops everything of a closed runtime that no worker owns: the injector, every timer
    /// heap and every registered stealable task (woken once so that its cell drops the
    /// future). Pinned tasks are left to their owner worker, which drains them on exit.
    pub(crate) fn drain(&self) {
        debug_assert!(self.is_closed());
        // Often on the thread that drops the runtime: destructors that panic here are still
        // this runtime's to report.
        self.handler.clone().serving(|| self.drain_all());
    }

    fn drain_all(&self) {
        self.blocking.shutdown();
        self.drain_injector();
        for waker in self.registry.take(None) {
            waker.wake();
        }
        for w in self.workers.iter() {
            for action in w.timers.drain_all() {
                match action {
                    TimerAction::Callback(c) => {
                        c.cancel();
                    }
                    TimerAction::Wake(s) => {
                        let handler = &self.handler;
                        handler.contain("Exception while dropping a sleep's waker", || {
                            s.cancel();
                        });
                    }
                }
            }
        }
        // What dead workers left in their queues: nobody else owns it.
        for w in self
            .workers
            .iter()
            .filter(|w| w.dead.load(Ordering::SeqCst))
        {
            drain_queue(|| w.stealer.steal(), Job::discard);
            if let Some(job) = w.next.take() {
                job.discard();
            }
            drain_queue(|| w.burst_share.steal(), Job::discard);
            // Pinned tasks: their futures may not be dropped away from their (gone) thread.
            drain_queue(|| w.inbox.steal(), std::mem::forget);
        }
        // Tasks woken above may have scheduled more work before noticing the close.
        self.drain_injector();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_known_blocked_only_in_the_cycle_it_was_found_blocked_in() {
        let queue = crossbeam_deque::Worker::<Job>::new_fifo();
        let slot = WorkerSlot::new(queue.stealer(), Instant::now()).unwrap();
        assert!(!slot.is_known_blocked(), "never marked");
        slot.count_cycle();
        slot.mark_blocked(slot.cycles());
        assert!(slot.is_known_blocked());
        slot.count_cycle();
        assert!(
            !slot.is_known_blocked(),
            "it has moved on from the job it was blocked in"
        );
        slot.mark_blocked(slot.cycles() - 1);
        assert!(
            !slot.is_known_blocked(),
            "marked from a stale reading of its cycles"
        );
    }
}
