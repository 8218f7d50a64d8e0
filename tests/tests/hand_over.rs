//! A task woken by the job running on its worker runs next, out of the worker's next slot:
//! the hand-over of a channel send and its receive. These tests check what the slot must not
//! cost: a task handed over to by a job that then stays stuck is still run by someone else,
//! two tasks handing over to each other do not starve the queue, and a task that yields
//! goes behind the tasks already queued.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use eddy::Builder;
use eddy_tests::{with_deadline, Anchors, PATIENCE};

/// Long enough for a broken rescue to fail instead of hang.
const LIMIT: Duration = Duration::from_secs(90);

/// A one-shot signal whose waiter reports once its waker is registered, so that the signal
/// is sure to wake it (and not find it not yet waiting).
#[derive(Default)]
struct Signal {
    fired: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Signal {
    /// Fires the signal, waking the waiter on this thread.
    fn fire(&self) {
        self.fired.store(true, Ordering::SeqCst);
        if let Some(w) = self.waker.lock().unwrap().take() {
            w.wake();
        }
    }

    /// Waits for the signal; `registered` gets a message once the waiter sleeps on it.
    fn wait(self: Arc<Self>, registered: mpsc::Sender<()>) -> impl Future<Output = ()> {
        let mut told = false;
        std::future::poll_fn(move |cx: &mut Context<'_>| {
            *self.waker.lock().unwrap() = Some(cx.waker().clone());
            if self.fired.load(Ordering::SeqCst) {
                return Poll::Ready(());
            }
            if !std::mem::replace(&mut told, true) {
                let _ = registered.send(());
            }
            Poll::Pending
        })
    }
}

/// How a stuck job waits for the task it handed over to.
#[derive(Clone, Copy, Debug)]
enum Stuck {
    /// Blocked in a system call.
    Blocking,
    /// Spinning on the CPU.
    Spinning,
}

fn stuck_until<T>(rx: &mpsc::Receiver<T>, how: Stuck) -> Option<T> {
    match how {
        Stuck::Blocking => rx.recv_timeout(PATIENCE).ok(),
        Stuck::Spinning => {
            let end = Instant::now() + PATIENCE;
            while Instant::now() < end {
                if let Ok(v) = rx.try_recv() {
                    return Some(v);
                }
                std::hint::spin_loop();
            }
            None
        }
    }
}

/// A task waits on a signal; a callback fires it (so the task lands in the callback's
/// worker's next slot) and then stays stuck until the task has run. With `busy_sibling`, the
/// other worker is kept busy with a yield loop and never parks.
fn handed_over_task_runs_while_the_job_is_stuck(how: Stuck, busy_sibling: bool) {
    with_deadline(LIMIT, move || {
        let rt = Builder::new()
            .workers(2)
            .thread_name("handover")
            .build()
            .unwrap();
        let anchors = Anchors::new(&rt, "handover", 2);
        let stop = Arc::new(AtomicBool::new(false));
        if busy_sibling {
            let (busy_tx, busy_rx) = mpsc::channel();
            let s = stop.clone();
            anchors.run(1, move || async move {
                let _ = busy_tx.send(());
                while !s.load(Ordering::SeqCst) {
                    eddy::yield_now().await;
                }
            });
            busy_rx.recv().unwrap();
        }
        let signal = Arc::new(Signal::default());
        let (registered_tx, registered_rx) = mpsc::channel();
        let (ran_tx, ran_rx) = mpsc::channel::<ThreadId>();
        let waiting = signal.clone().wait(registered_tx);
        let waiter = rt.handle().spawn(async move {
            waiting.await;
            let _ = ran_tx.send(std::thread::current().id());
        });
        registered_rx.recv().unwrap();

        let (tx, rx) = mpsc::channel();
        anchors.run(0, move || async move {
            signal.fire();
            let ran_on = stuck_until(&ran_rx, how);
            let _ = tx.send((std::thread::current().id(), ran_on));
        });
        let (stuck, ran_on) = rx.recv().unwrap();
        stop.store(true, Ordering::SeqCst);
        let ran_on = ran_on.unwrap_or_else(|| {
            panic!("({how:?}) the task handed over to waited {PATIENCE:?} for the stuck job")
        });
        assert_ne!(ran_on, stuck, "it ran on the stuck worker?");
        drop(waiter);
        drop(anchors);
    });
}

#[test]
fn a_task_handed_over_to_by_a_blocked_job_runs_on_the_idle_sibling() {
    handed_over_task_runs_while_the_job_is_stuck(Stuck::Blocking, false);
}

#[test]
fn a_task_handed_over_to_by_a_spinning_job_runs_on_the_idle_sibling() {
    handed_over_task_runs_while_the_job_is_stuck(Stuck::Spinning, false);
}

#[test]
fn a_task_handed_over_to_by_a_stuck_job_runs_on_a_busy_sibling() {
    handed_over_task_runs_while_the_job_is_stuck(Stuck::Blocking, true);
}

/// A future that wakes its partner at every poll and stays pending until `stop` is set.
fn hand_over_forever(
    mine: Arc<Mutex<Option<Waker>>>,
    partner: Arc<Mutex<Option<Waker>>>,
    stop: Arc<AtomicBool>,
) -> impl Future<Output = ()> {
    std::future::poll_fn(move |cx: &mut Context<'_>| {
        if stop.load(Ordering::SeqCst) {
            return Poll::Ready(());
        }
        *mine.lock().unwrap() = Some(cx.waker().clone());
        if let Some(w) = partner.lock().unwrap().take() {
            w.wake();
        }
        Poll::Pending
    })
}

/// On one worker, two tasks wake each other at every poll, forever: each lands in the next
/// slot. A task queued behind them must still run (it is the one that stops them).
#[test]
fn two_tasks_handing_over_forever_do_not_starve_the_queue() {
    with_deadline(LIMIT, || {
        let rt = Builder::new().workers(1).build().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let a: Arc<Mutex<Option<Waker>>> = Arc::default();
        let b: Arc<Mutex<Option<Waker>>> = Arc::default();
        let s = stop.clone();
        let done = rt.handle().spawn(async move {
            let first = eddy::spawn(hand_over_forever(a.clone(), b.clone(), s.clone()));
            let second = eddy::spawn(hand_over_forever(b, a, s.clone()));
            // Queued behind the pair, which starts handing over at once.
            let stopper = eddy::spawn(async move { s.store(true, Ordering::SeqCst) });
            stopper.await.unwrap();
            drop((first, second));
        });
        rt.block_on(done).unwrap();
        assert!(stop.load(Ordering::SeqCst));
    });
}

/// A task that yields wakes itself: it goes behind the tasks already queued (asyncio's
/// `sleep(0)`), not into the next slot. One worker, so the order is the queue's.
#[test]
fn a_task_that_yields_runs_after_the_tasks_already_queued() {
    with_deadline(LIMIT, || {
        let rt = Builder::new().workers(1).build().unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let o = order.clone();
        let done = rt.handle().spawn(async move {
            let (o1, o2) = (o.clone(), o.clone());
            let yielder = eddy::spawn(async move {
                eddy::yield_now().await;
                o1.lock().unwrap().push("yielder");
            });
            let other = eddy::spawn(async move { o2.lock().unwrap().push("other") });
            yielder.await.unwrap();
            other.await.unwrap();
        });
        rt.block_on(done).unwrap();
        assert_eq!(*order.lock().unwrap(), ["other", "yielder"]);
    });
}
