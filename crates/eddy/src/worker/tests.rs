//! Whole-runtime tests of the worker loop that need a hook only a test build has.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use crate::{Builder, ExceptionContext};

/// Generous: nothing here should take more than moments.
const PATIENCE: Duration = Duration::from_secs(30);

/// Runs `f` on its own thread; fails instead of hanging if it has not returned in time.
fn within<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(f()).unwrap());
    rx.recv_timeout(PATIENCE * 2).expect("hang")
}

/// A worker whose loop panics (as a bug of ours would; the fault hook makes it) is reported
/// and counted out: timers on its heap still fire, its sibling runs everything new, and
/// dropping the runtime returns.
#[test]
fn a_worker_that_dies_is_counted_out_and_its_timers_adopted() {
    within(|| {
        let reports = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = reports.clone();
        let rt = Builder::new()
            .workers(2)
            .exception_handler(move |ctx: &ExceptionContext| {
                log.lock().unwrap().push(ctx.message().to_string())
            })
            .build()
            .unwrap();
        let shared = rt.shared().clone();
        shared.workers[0].fault.store(true, SeqCst);
        shared.workers[0].notify();
        let died = || reports.lock().unwrap().iter().any(|m| m.contains("died"));
        let end = std::time::Instant::now() + PATIENCE;
        while !died() {
            assert!(
                std::time::Instant::now() < end,
                "no report of the dead worker"
            );
            std::thread::yield_now();
        }
        assert!(shared.workers[0].dead.load(SeqCst));

        // Timers from a foreign thread go round robin: half of them to the dead worker's heap.
        let (tx, rx) = mpsc::channel();
        for i in 0..20 {
            let tx = tx.clone();
            rt.handle()
                .call_later(Duration::from_millis(1), move || tx.send(i).unwrap())
                .unwrap();
        }
        let mut fired: Vec<i32> = (0..20)
            .map(|_| rx.recv_timeout(PATIENCE).unwrap())
            .collect();
        fired.sort_unstable();
        assert_eq!(fired, (0..20).collect::<Vec<_>>());
        let task = rt.handle().spawn(async { 6 * 7 });
        assert_eq!(rt.block_on(task).unwrap(), 42);
        drop(rt);
    });
}

use super::{earlier, is_surplus, must_stay_awake, ParkCheck, SURPLUS_JOBS};

/// With nothing to do, every worker parks and the monitor sleeps until one wakes: an idle
/// runtime costs no CPU (spare workers that never started do not count as awake).
#[test]
fn the_monitor_of_an_idle_runtime_sleeps() {
    within(|| {
        let rt = Builder::new().workers(2).build().unwrap();
        let task = rt.handle().spawn(async { 1 });
        assert_eq!(rt.block_on(task).unwrap(), 1);
        let monitor = &rt.shared().monitor;
        // It looks every millisecond or so until it goes to sleep; then it looks no more
        // (the runtime has nothing to wake it for).
        let end = std::time::Instant::now() + PATIENCE;
        loop {
            let before = monitor.looks();
            std::thread::sleep(Duration::from_millis(50));
            if monitor.looks() == before {
                break;
            }
            assert!(
                std::time::Instant::now() < end,
                "the monitor never went to sleep"
            );
        }
    });
}

/// A two-worker runtime that ran one task and went idle, whose monitor now sleeps until a
/// worker wakes.
fn idle_runtime_with_its_monitor_asleep() -> crate::Runtime {
    let rt = Builder::new().workers(2).spare_workers(0).build().unwrap();
    let task = rt.handle().spawn(async { 1 });
    assert_eq!(rt.block_on(task).unwrap(), 1);
    let end = std::time::Instant::now() + PATIENCE;
    while !rt.shared().monitor.is_asleep() {
        assert!(
            std::time::Instant::now() < end,
            "the monitor of an idle runtime never went to sleep"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    rt
}

/// A job that holds its worker until `release` sends, after setting a timer on that worker's
/// own heap that reports on `fired`: only a sibling the monitor sends fires it meanwhile.
fn hold_worker_with_a_timer_due(fired: mpsc::Sender<()>, release: mpsc::Receiver<()>) {
    crate::call_later(Duration::from_millis(1), move || fired.send(()).unwrap());
    release.recv().unwrap();
}

/// Work submitted from outside while the monitor sleeps: the monitor's alarm is set (by
/// the submitting thread, or else by the worker it woke) instead of the monitor being woken,
/// and the monitor still looks, so what a job that then holds the worker strands is served
/// (its due timer fires while held). Who sets it is a matter of cost (the wake-latency
/// benchmark), not of behaviour.
#[test]
fn a_worker_woken_from_outside_while_the_monitor_sleeps_is_still_watched() {
    within(|| {
        let rt = idle_runtime_with_its_monitor_asleep();
        let (fired_tx, fired_rx) = mpsc::channel::<()>();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let held = rt
            .handle()
            .spawn(async move { hold_worker_with_a_timer_due(fired_tx, release_rx) });
        let fired = fired_rx.recv_timeout(PATIENCE);
        release_tx.send(()).unwrap();
        rt.block_on(held).unwrap();
        fired.expect("the held worker's due timer never fired while it was held");
    });
}

/// A worker woken by its own timer (no thread outside wakes it through the injector) while
/// the monitor sleeps sets the monitor's alarm itself on its way out of its park.
#[test]
fn a_worker_woken_by_its_own_timer_while_the_monitor_sleeps_is_still_watched() {
    within(|| {
        let rt = idle_runtime_with_its_monitor_asleep();
        let (fired_tx, fired_rx) = mpsc::channel::<()>();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        // A timer goes straight to a worker's heap, and its owner wakes for it.
        rt.handle()
            .call_later(Duration::from_millis(1), move || {
                hold_worker_with_a_timer_due(fired_tx, release_rx);
                done_tx.send(()).unwrap();
            })
            .unwrap();
        let fired = fired_rx.recv_timeout(PATIENCE);
        release_tx.send(()).unwrap();
        done_rx.recv_timeout(PATIENCE).unwrap();
        fired.expect("the held worker's due timer never fired while it was held");
    });
}

/// The CPUs thread `tid` may run on.
fn allowed_cpus(tid: i32) -> Vec<usize> {
    use crate::worker::monitor::steering::{Affinity, Kernel};
    Kernel.get(tid).unwrap().cpus()
}

/// Polls `done` until it holds; fails with `what` after `PATIENCE`.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + PATIENCE;
    while !done() {
        assert!(std::time::Instant::now() < end, "{what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Spawns a long job on `rt` that keeps work waiting on its worker (a far timer, so that
/// the monitor sends help while it runs) and runs `hold` with its thread's id; returns the
/// task and that id once the job has begun.
fn spawn_long_job(
    rt: &crate::Runtime,
    hold: impl FnOnce(i32) + Send + 'static,
) -> (crate::Task<()>, i32) {
    let (tid_tx, tid_rx) = mpsc::channel();
    let task = rt.handle().spawn(async move {
        let timer = crate::call_later(Duration::from_secs(3600), || {});
        let me = crate::worker::monitor::thread_state::current_tid();
        tid_tx.send(me).unwrap();
        hold(me);
        timer.cancel();
    });
    (task, tid_rx.recv_timeout(PATIENCE).unwrap())
}

/// While a worker spins in a long job, the monitor keeps its sibling off the job's CPU
/// (`monitor::steering`), and once the job is over the sibling may run on all its own CPUs
/// again.
#[test]
fn a_sibling_is_kept_off_the_cpu_of_a_long_job_until_it_ends() {
    within(|| {
        let rt = Builder::new().workers(2).spare_workers(0).build().unwrap();
        let shared = rt.shared().clone();
        let own = allowed_cpus(0);
        if own.len() < 2 {
            eprintln!("skipped: the workers may run on one CPU only ({own:?})");
            return;
        }
        let release = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let on_cpu = Arc::new(std::sync::atomic::AtomicUsize::new(usize::MAX));
        let (spin_release, spin_cpu) = (release.clone(), on_cpu.clone());
        let (held, spinner) = spawn_long_job(&rt, move |me| {
            while !spin_release.load(SeqCst) {
                if let Some(cpu) =
                    crate::worker::monitor::thread_state::read(me).and_then(|t| t.cpu)
                {
                    spin_cpu.store(cpu, SeqCst);
                }
            }
        });
        // Each worker publishes its id as its thread starts.
        let tids = || -> Vec<i32> { shared.workers.iter().map(|w| w.tid.load(SeqCst)).collect() };
        wait_for("a worker thread never started", || !tids().contains(&0));
        let sibling = tids().into_iter().find(|&t| t != spinner).unwrap();
        wait_for("the sibling was never kept off the long job's CPU", || {
            let cpu = on_cpu.load(SeqCst);
            cpu != usize::MAX && !allowed_cpus(sibling).contains(&cpu)
        });
        assert!(
            allowed_cpus(spinner).len() == own.len(),
            "the long job itself was moved"
        );
        release.store(true, SeqCst);
        rt.block_on(held).unwrap();
        wait_for("the sibling never got its own CPUs back", || {
            allowed_cpus(sibling) == own
        });
    });
}

/// A worker blocked in a long job (asleep in the kernel) leaves its CPU free: nobody is
/// kept off it.
#[test]
fn a_worker_blocked_in_a_long_job_keeps_nobody_off_its_cpu() {
    within(|| {
        let rt = Builder::new().workers(2).spare_workers(0).build().unwrap();
        let shared = rt.shared().clone();
        let own = allowed_cpus(0);
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (held, blocked) = spawn_long_job(&rt, move |_| release_rx.recv().unwrap());
        // Seen blocked at two looks: the steering of the first of them is done.
        wait_for("the held worker was never seen blocked twice", || {
            shared.monitor.blocked_seen() >= 2
        });
        for w in shared.workers.iter() {
            let tid = w.tid.load(SeqCst);
            if tid != blocked {
                assert_eq!(allowed_cpus(tid), own, "a sibling was kept off a free CPU");
            }
        }
        release_tx.send(()).unwrap();
        rt.block_on(held).unwrap();
    });
}

/// Right after a long job, the monitor reads whether a worker's thread sleeps in the kernel,
/// and takes one that does outside its park for blocked in a job (`monitor::thread_state`),
/// without waiting for a second look to see its cycle counter stand still; until the worker
/// moves on, a sibling serves its IO without waiting out the grace.
#[test]
fn after_a_long_job_a_worker_blocked_in_a_job_is_seen_blocked() {
    within(|| {
        let rt = Builder::new().workers(2).build().unwrap();
        let (entered_tx, entered_rx) = mpsc::channel::<()>();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let held = rt.handle().spawn(async move {
            // A timer on this worker's heap: it has work waiting for as long as it is held,
            // so the monitor sends help and, held long enough, takes it for a long job.
            let timer = crate::call_later(Duration::from_secs(3600), || {});
            entered_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            timer.cancel();
        });
        entered_rx.recv_timeout(PATIENCE).unwrap();
        let monitor = &rt.shared().monitor;
        let end = std::time::Instant::now() + PATIENCE;
        while monitor.blocked_seen() == 0 {
            assert!(
                std::time::Instant::now() < end,
                "the held worker was never seen blocked"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // Still held, so still in that cycle: a sibling sent to it serves its IO at once.
        let workers = &rt.shared().workers;
        assert!(
            workers.iter().any(|w| w.is_known_blocked()),
            "the worker seen blocked is not marked so for its rescuer"
        );
        release_tx.send(()).unwrap();
        rt.block_on(held).unwrap();
        let end = std::time::Instant::now() + PATIENCE;
        while workers.iter().any(|w| w.is_known_blocked()) {
            assert!(
                std::time::Instant::now() < end,
                "a worker that moved on from its job is still taken for blocked in it"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

#[test]
fn a_worker_sleeps_through_injector_work_that_a_searcher_will_take() {
    let injector = ParkCheck {
        injector: true,
        ..ParkCheck::default()
    };
    assert!(must_stay_awake(injector), "nobody else will take it");
    assert!(
        !must_stay_awake(ParkCheck {
            someone_searching: true,
            ..injector
        }),
        "a searcher will: a worker refused permission to search must not spin"
    );
}

#[test]
fn a_worker_a_waker_counted_as_searching_stays_awake() {
    let woken = ParkCheck {
        woken: true,
        someone_searching: true,
        ..ParkCheck::default()
    };
    assert!(
        must_stay_awake(woken),
        "the searcher that someone_searching counts is this worker"
    );
}

#[test]
fn work_pushed_at_this_worker_keeps_it_awake_whoever_searches() {
    for c in [
        ParkCheck {
            inbox: true,
            ..ParkCheck::default()
        },
        ParkCheck {
            burst_share: true,
            ..ParkCheck::default()
        },
        ParkCheck {
            closed: true,
            ..ParkCheck::default()
        },
    ] {
        let searched = ParkCheck {
            someone_searching: true,
            ..c
        };
        assert!(must_stay_awake(c) && must_stay_awake(searched), "{c:?}");
    }
    assert!(!must_stay_awake(ParkCheck::default()));
}

#[test]
fn a_single_job_is_the_workers_own_next_step_a_second_is_surplus() {
    assert!(!is_surplus(0));
    assert!(!is_surplus(1), "one job: no sibling is woken for it");
    assert!(is_surplus(SURPLUS_JOBS));
    assert!(is_surplus(1000));
}

#[test]
fn the_earlier_of_two_deadlines_ignores_a_missing_one() {
    assert_eq!(earlier(None, None), None);
    assert_eq!(earlier(Some(5), None), Some(5));
    assert_eq!(earlier(None, Some(7)), Some(7));
    assert_eq!(earlier(Some(9), Some(7)), Some(7));
}
