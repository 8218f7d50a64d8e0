//! Loom models of the park handshake (`RUSTFLAGS="--cfg eddy_loom"`, run by `.ci/run`).
//!
//! The idle bookkeeping is the real [`Idle`] (its word and mutex are loom's in this build)
//! and the decision to stay awake is the real [`must_stay_awake`]; the steps around them
//! repeat, in order, what `Worker::park`, `Worker::find_work`, `Worker::stop_searching`,
//! `Shared::push_remote` and `Shared::add_timer` do, with the injector and a timer heap's
//! next deadline reduced to one atomic each and a worker's eventfd to a [`Notifier`]. A
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

const AWAKE: usize = 0;
const NO_TIMER: usize = usize::MAX;

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
}

struct Runtime {
    idle: Idle,
    /// Jobs in the injector.
    injector: AtomicUsize,
    /// Jobs still to be taken; the worker that takes the last one shuts the model down.
    left: AtomicUsize,
    closed: AtomicBool,
    park_deadline: Vec<AtomicUsize>,
    /// Worker 0's timer heap: its next deadline.
    next_timer: AtomicUsize,
    notifiers: Vec<Notifier>,
}

impl Runtime {
    fn new(workers: usize, jobs: usize) -> Arc<Runtime> {
        Arc::new(Runtime {
            idle: Idle::new(workers),
            injector: AtomicUsize::new(0),
            left: AtomicUsize::new(jobs),
            closed: AtomicBool::new(false),
            park_deadline: (0..workers).map(|_| AtomicUsize::new(AWAKE)).collect(),
            next_timer: AtomicUsize::new(NO_TIMER),
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

    /// `Shared::add_timer` on worker 0: the heap's new earliest deadline, fence, then
    /// whether the owner sleeps.
    fn add_timer(&self) {
        self.next_timer.store(5, Release);
        fence(SeqCst);
        if self.park_deadline[0].load(SeqCst) != AWAKE {
            self.notifiers[0].notify();
        }
    }

    /// A steal from the injector.
    fn take_job(&self) -> bool {
        let mut n = self.injector.load(SeqCst);
        while n > 0 {
            match self.injector.compare_exchange(n, n - 1, SeqCst, SeqCst) {
                Ok(_) => {
                    if self.left.fetch_sub(1, SeqCst) == 1 {
                        // The last job: shut down, as `Runtime::drop` wakes every worker.
                        self.closed.store(true, SeqCst);
                        self.notifiers.iter().for_each(Notifier::notify);
                    }
                    return true;
                }
                Err(actual) => n = actual,
            }
        }
        false
    }

    /// `Worker::park` up to its wait, the wait, and the return to work. Returns whether the
    /// worker is searching afterwards.
    fn park(&self, me: usize, was_searching: bool) -> bool {
        if self.idle.park(me, was_searching) && self.injector.load(SeqCst) > 0 {
            self.wake_idle();
        }
        self.park_deadline[me].store(1, SeqCst);
        fence(SeqCst);
        let timer_set = self.next_timer.load(Acquire) != NO_TIMER;
        let work_arrived = must_stay_awake(ParkCheck {
            inbox: false,
            handed: false,
            injector: self.injector.load(SeqCst) > 0,
            someone_searching: self.idle.anyone_searching(),
            closed: self.closed.load(SeqCst),
        });
        // A timer makes the wait a timed one, which ends by itself: not modelled as a sleep.
        if !work_arrived && !timer_set {
            self.notifiers[me].wait();
        }
        self.park_deadline[me].store(AWAKE, SeqCst);
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
        while rt.next_timer.load(Acquire) == NO_TIMER {
            rt.park(0, false);
        }
        setter.join().unwrap();
    });
}
