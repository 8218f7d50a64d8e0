//! Loom models of the park handshake (`RUSTFLAGS="--cfg eddy_loom"`, run by `.ci/run`).
//!
//! The idle bookkeeping is the real [`Idle`] (its word and mutex are loom's in this build)
//! and the decision to stay awake is the real [`must_stay_awake`]; the steps around them
//! repeat, in order, what `Worker::park`, `Worker::find_work`, `Worker::stop_searching`,
//! `Worker::push_local`, `Worker::share_burst_with_woken_sibling`, `Shared::push_remote`,
//! `Shared::schedule_pinned` and `Shared::add_timer` do, with the injector, an inbox, a
//! `burst_share` queue and a timer heap's next deadline reduced to one atomic each, a ready queue
//! to crossbeam's two indices ([`ReadyQueue`]) and a worker's eventfd to a [`Notifier`]. A
//! change to the order of those steps or to their fences must be made here too.
//!
//! A lost wake-up leaves a worker asleep with work waiting; as nothing else wakes it, loom
//! then reports a deadlock.

use loom::sync::atomic::AtomicBool;
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

use super::{must_stay_awake, ParkCheck};
use crate::sync::atomic::{fence, AtomicUsize, Ordering::*};
use crate::worker::idle::Idle;

/// A worker's eventfd: a notification is kept until the next wait consumes it.
struct Notifier {
    pending: Mutex<bool>,
    cv: Condvar,
}

impl Notifier {
    fn new() -> Self {
        Notifier {
            pending: Mutex::new(false),
            cv: Condvar::new(),
        }
    }

    fn notify(&self) {
        *self.pending.lock().unwrap() = true;
        self.cv.notify_one();
    }

    fn wait(&self) {
        let mut pending = self.pending.lock().unwrap();
        while !*pending {
            pending = self.cv.wait(pending).unwrap();
        }
        *pending = false;
    }

    /// Consumes a pending notification without waiting, as a sibling's harvest of an epoll
    /// nested in its own does. True if there was one.
    fn take(&self) -> bool {
        std::mem::replace(&mut *self.pending.lock().unwrap(), false)
    }
}

/// Worker 0's ready queue, reduced to the indices of crossbeam's deque: the owner publishes
/// a push with a `Release` store of `back`; others read `front`, fence, read `back`, and
/// claim a job by moving `front` on.
struct ReadyQueue {
    front: AtomicUsize,
    back: AtomicUsize,
}

impl ReadyQueue {
    /// The owner's push; returns the queue's length after it.
    fn push(&self) -> usize {
        let b = self.back.load(Relaxed) + 1;
        self.back.store(b, Release);
        b - self.front.load(Relaxed)
    }

    fn is_empty(&self) -> bool {
        let f = self.front.load(Acquire);
        fence(SeqCst);
        self.back.load(Acquire) <= f
    }

    /// Claims one job (a steal, or the owner's FIFO pop). False when empty.
    fn take(&self) -> bool {
        loop {
            let f = self.front.load(Acquire);
            fence(SeqCst);
            if self.back.load(Acquire) <= f {
                return false;
            }
            if self
                .front
                .compare_exchange(f, f + 1, SeqCst, Relaxed)
                .is_ok()
            {
                return true;
            }
        }
    }
}

struct Runtime {
    idle: Idle,
    /// Jobs in the injector.
    injector: AtomicUsize,
    /// Worker 0's ready queue.
    ready: ReadyQueue,
    /// Pinned tasks in worker 0's inbox, and jobs in its `burst_share` queue.
    inbox: AtomicUsize,
    burst_share: AtomicUsize,
    /// Jobs still to be taken; the worker that takes the last one shuts the model down.
    left: AtomicUsize,
    closed: AtomicBool,
    /// `WorkerSlot::parked` of each worker.
    parked: Vec<AtomicBool>,
    /// Worker 0's timer heap: whether it has a next deadline.
    has_timer: AtomicBool,
    notifiers: Vec<Notifier>,
}

impl Runtime {
    fn new(workers: usize, jobs: usize) -> Arc<Runtime> {
        Arc::new(Runtime {
            idle: Idle::new(workers),
            injector: AtomicUsize::new(0),
            ready: ReadyQueue {
                front: AtomicUsize::new(0),
                back: AtomicUsize::new(0),
            },
            inbox: AtomicUsize::new(0),
            burst_share: AtomicUsize::new(0),
            left: AtomicUsize::new(jobs),
            closed: AtomicBool::new(false),
            parked: (0..workers).map(|_| AtomicBool::new(false)).collect(),
            has_timer: AtomicBool::new(false),
            notifiers: (0..workers).map(|_| Notifier::new()).collect(),
        })
    }

    /// `Shared::wake_idle`.
    fn wake_idle(&self) {
        if let Some(index) = self.idle.worker_to_wake() {
            self.notifiers[index].notify();
        }
    }

    /// `Shared::push_remote`: push, fence, then the idle state.
    fn push_remote(&self) {
        self.injector.fetch_add(1, SeqCst);
        fence(SeqCst);
        self.wake_idle();
    }

    /// `Worker::push_local` on worker 0: the push, then (for surplus work, a second job)
    /// fence and the idle state.
    fn push_local(&self) {
        if self.ready.push() > 1 {
            fence(SeqCst);
            if self.idle.should_wake() {
                self.wake_idle();
            }
        }
    }

    /// What `Shared::schedule_pinned` (into the inbox, from a foreign thread) and
    /// `Worker::share_burst_with_woken_sibling` (into `burst_share`, from a sibling) both do: push onto
    /// worker 0's queue, fence, then notify it if it is parked.
    fn push_at_worker_0(&self, queue: &AtomicUsize) {
        queue.fetch_add(1, SeqCst);
        fence(SeqCst);
        if self.parked[0].load(SeqCst) {
            self.notifiers[0].notify();
        }
    }

    /// `Shared::add_timer` on worker 0: the heap's new earliest deadline, fence, then
    /// whether the owner sleeps.
    fn add_timer(&self) {
        self.has_timer.store(true, Release);
        fence(SeqCst);
        if self.parked[0].load(SeqCst) {
            self.notifiers[0].notify();
        }
    }

    /// A sibling that nests worker `w`'s epoll (a rescue, or `w` its guest) harvests it once:
    /// a notification found there is consumed, and passed on only if `w` is marked parked
    /// (`pass_on_notification`: an awake worker looks at everything before it sleeps).
    fn harvest_nested(&self, w: usize) {
        if self.notifiers[w].take() && self.parked[w].load(SeqCst) {
            self.notifiers[w].notify();
        }
    }

    /// A steal from worker 0's ready queue or from the injector.
    fn take_job(&self) -> bool {
        if !self.ready.take() && !self.take_from_injector() {
            return false;
        }
        if self.left.fetch_sub(1, SeqCst) == 1 {
            // The last job: shut down, as `Runtime::drop` wakes every worker.
            self.closed.store(true, SeqCst);
            self.notifiers.iter().for_each(Notifier::notify);
        }
        true
    }

    fn take_from_injector(&self) -> bool {
        let mut n = self.injector.load(SeqCst);
        while n > 0 {
            match self.injector.compare_exchange(n, n - 1, SeqCst, SeqCst) {
                Ok(_) => return true,
                Err(actual) => n = actual,
            }
        }
        false
    }

    /// `Shared::has_stealable_work`.
    fn has_stealable_work(&self) -> bool {
        self.injector.load(SeqCst) > 0 || !self.ready.is_empty()
    }

    /// `Worker::park` up to its wait, the wait, and the return to work. Returns whether the
    /// worker is searching afterwards.
    fn park(&self, me: usize, was_searching: bool) -> bool {
        if self.idle.list_parked(me, was_searching) && self.has_stealable_work() {
            self.wake_idle();
        }
        self.parked[me].store(true, SeqCst);
        fence(SeqCst);
        let timer_set = self.has_timer.load(Acquire);
        let work_arrived = must_stay_awake(ParkCheck {
            inbox: self.inbox.load(SeqCst) > 0,
            burst_share: self.burst_share.load(SeqCst) > 0,
            injector: self.injector.load(SeqCst) > 0,
            someone_searching: self.idle.anyone_searching(),
            woken: !self.idle.is_listed(me),
            closed: self.closed.load(SeqCst),
        });
        // A timer makes the wait a timed one, which ends by itself: not modelled as a sleep.
        if !work_arrived && !timer_set {
            self.notifiers[me].wait();
        }
        self.parked[me].store(false, SeqCst);
        self.idle.unpark_self(me)
    }

    /// A worker's loop, reduced to phase 2: search (if permitted), take the injector's
    /// jobs, else park; until shutdown.
    fn worker(&self, me: usize) {
        let mut searching = false;
        while !self.closed.load(SeqCst) {
            if !searching {
                searching = self.idle.try_start_searching();
            }
            if searching && self.take_job() {
                // `Worker::stop_searching`: the last searcher to find work wakes another
                // if more is waiting.
                searching = false;
                if self.idle.stop_searching() && self.injector.load(SeqCst) > 0 {
                    self.wake_idle();
                }
                continue;
            }
            let was_searching = std::mem::replace(&mut searching, false);
            searching = self.park(me, was_searching);
        }
    }
}

fn run_model(workers: usize, jobs: usize) {
    let rt = Runtime::new(workers, jobs);
    let threads: Vec<_> = (1..workers)
        .map(|me| {
            let rt = rt.clone();
            thread::spawn(move || rt.worker(me))
        })
        .collect();
    let pusher = {
        let rt = rt.clone();
        thread::spawn(move || (0..jobs).for_each(|_| rt.push_remote()))
    };
    rt.worker(0);
    pusher.join().unwrap();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(rt.left.load(SeqCst), 0);
}

/// Two workers go to sleep while a foreign thread pushes a job into the injector: some
/// worker takes it (nobody sleeps through it).
#[test]
fn a_job_pushed_from_outside_is_never_slept_through() {
    crate::sync::model("park: a job pushed from outside, two workers", || {
        run_model(2, 1)
    });
}

/// A foreign thread pushes a job and wakes the only worker just as it parks, while a
/// sibling that nests the worker's epoll (a rescue) harvests it: the notification may be
/// consumed before the worker is marked parked, and so not passed on. The worker must
/// still not sleep, although the waker counted it as the searcher who will take the job.
#[test]
fn a_wake_consumed_by_a_nesting_sibling_is_not_slept_through() {
    crate::sync::model(
        "park: a wake consumed by a sibling nesting our epoll",
        || {
            let rt = Runtime::new(1, 1);
            let pusher = {
                let rt = rt.clone();
                thread::spawn(move || rt.push_remote())
            };
            let rescuer = {
                let rt = rt.clone();
                thread::spawn(move || rt.harvest_nested(0))
            };
            rt.worker(0);
            pusher.join().unwrap();
            rescuer.join().unwrap();
            assert_eq!(rt.left.load(SeqCst), 0);
        },
    );
}

/// Two jobs pushed one after the other while both workers search and park: the wake-up
/// chain (the last searcher to find work wakes another) loses neither.
#[test]
fn two_jobs_pushed_from_outside_are_both_taken() {
    crate::sync::model("park: two jobs pushed from outside, two workers", || {
        run_model(2, 2)
    });
}

/// A timer set from another thread while the worker goes to sleep: the worker either sees
/// it before sleeping (and sleeps only until it is due) or is notified.
#[test]
fn a_timer_set_while_the_owner_parks_is_seen() {
    crate::sync::model("park: a timer set while its owner parks", || {
        let rt = Runtime::new(1, 0);
        let setter = {
            let rt = rt.clone();
            thread::spawn(move || rt.add_timer())
        };
        while !rt.has_timer.load(Acquire) {
            rt.park(0, false);
        }
        setter.join().unwrap();
    });
}

/// Surplus work pushed onto a worker's own queue (a second job) while its only sibling
/// searches and parks; the owner then takes one job and runs it for ever (a long job): the
/// sibling takes the other. This is the parallelism `push_local`'s fence buys.
#[test]
fn surplus_pushed_locally_reaches_a_parking_sibling() {
    crate::sync::model("park: surplus pushed locally while a sibling parks", || {
        let rt = Runtime::new(2, 2);
        let sibling = {
            let rt = rt.clone();
            thread::spawn(move || rt.worker(1))
        };
        rt.push_local();
        rt.push_local();
        rt.take_job();
        sibling.join().unwrap();
        assert_eq!(rt.left.load(SeqCst), 0);
    });
}

/// Worker 0 goes to sleep while something is pushed at it alone, `push` being the path
/// under test; it loops until it has seen the push in `queue`.
fn run_push_at_parking_worker(push: fn(&Runtime)) {
    let rt = Runtime::new(1, 0);
    let pusher = {
        let rt = rt.clone();
        thread::spawn(move || push(&rt))
    };
    while rt.inbox.load(SeqCst) == 0 && rt.burst_share.load(SeqCst) == 0 {
        rt.park(0, false);
    }
    pusher.join().unwrap();
}

/// A pinned task woken from a foreign thread while its owner parks: the owner sees its
/// inbox before sleeping, or is notified.
#[test]
fn a_pinned_wake_while_the_owner_parks_is_seen() {
    crate::sync::model("park: a pinned task woken while its owner parks", || {
        run_push_at_parking_worker(|rt| rt.push_at_worker_0(&rt.inbox))
    });
}

/// Jobs of a burst handed to a sibling that woke, missed them and is parking again: it sees
/// its `burst_share` queue before sleeping, or is notified.
#[test]
fn a_burst_handed_to_a_parking_sibling_is_seen() {
    crate::sync::model("park: a burst handed to a sibling as it parks", || {
        run_push_at_parking_worker(|rt| rt.push_at_worker_0(&rt.burst_share))
    });
}
