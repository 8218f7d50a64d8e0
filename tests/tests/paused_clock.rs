//! The paused clock: with `Builder::start_paused(true)` time stands still and jumps to the
//! next deadline whenever every worker is idle, with any number of workers, so tests that
//! would take hours of real time finish in milliseconds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eddy_tests::with_deadline;

fn paused(workers: usize) -> eddy::Runtime {
    eddy::Builder::new()
        .workers(workers)
        .start_paused(true)
        .build()
        .unwrap()
}

const HOUR: Duration = Duration::from_secs(3600);

/// Hours of virtual time pass in moments of real time: a test that has not finished after
/// this long is waiting in real time, and fails instead of hanging.
const REAL_LIMIT: Duration = Duration::from_secs(60);

#[test]
fn hours_of_timers_finish_in_milliseconds_on_several_workers() {
    with_deadline(REAL_LIMIT, || {
        let rt = paused(4);
        let (virtual_elapsed, order) = rt.block_on(async {
            let t0 = eddy::time();
            let order = Arc::new(Mutex::new(Vec::new()));
            for (name, h) in [("c", 3u64), ("a", 1), ("b", 2)] {
                let order = order.clone();
                eddy::call_later(HOUR * h as u32, move || order.lock().unwrap().push(name));
            }
            let sleeper = eddy::spawn(async { eddy::time::sleep(HOUR * 5).await });
            let mut every = eddy::time::interval(HOUR);
            for _ in 0..=10 {
                every.tick().await;
            }
            sleeper.await.unwrap();
            let elapsed = eddy::time() - t0;
            let order = order.lock().unwrap().clone();
            (elapsed, order)
        });
        assert_eq!(
            virtual_elapsed,
            HOUR * 10,
            "the clock jumped exactly to each deadline"
        );
        assert_eq!(order, vec!["a", "b", "c"]);
    });
}

/// The `block_on` thread is not a worker: the clock must not jump while it still works after
/// a wake-up (here before it sets its next timer), even though every worker is idle and a
/// later deadline is waiting.
#[test]
fn the_clock_waits_for_a_block_on_thread_that_is_still_working() {
    with_deadline(REAL_LIMIT, || {
        let rt = paused(2);
        rt.block_on(async {
            let t0 = eddy::time();
            let far = eddy::call_later(HOUR * 10, || ());
            for i in 1..=5u32 {
                eddy::time::sleep(HOUR).await;
                std::thread::sleep(Duration::from_millis(5));
                assert_eq!(
                    eddy::time() - t0,
                    HOUR * i,
                    "the clock moved while block_on was busy"
                );
            }
            far.cancel();
        });
    });
}

/// The clock jumps once per distinct deadline, and each jump waits until every loop is
/// parked, which on a loaded machine costs scheduler slices: the 10,000 sleeps share 360
/// deadlines (10 s apart) so that the test's length does not grow with the machine's load.
#[test]
fn ten_thousand_sleeps_of_up_to_an_hour_end_on_time() {
    with_deadline(REAL_LIMIT, || {
        let rt = paused(2);
        let early = Arc::new(AtomicUsize::new(0));
        let e = early.clone();
        let done = rt.block_on(async move {
            let tasks: Vec<_> = (0..10_000u64)
                .map(|i| {
                    let e = e.clone();
                    eddy::spawn(async move {
                        let d = Duration::from_secs((i * 7919) % 360 * 10);
                        let start = eddy::time();
                        eddy::time::sleep(d).await;
                        if eddy::time() - start < d {
                            e.fetch_add(1, Ordering::SeqCst);
                        }
                    })
                })
                .collect();
            let n = tasks.len();
            for t in tasks {
                t.await.unwrap();
            }
            n
        });
        assert_eq!(done, 10_000);
        assert_eq!(early.load(Ordering::SeqCst), 0);
    });
}

#[test]
fn a_day_long_timeout_elapses_at_once() {
    with_deadline(REAL_LIMIT, || {
        let rt = paused(2);
        let res = rt.block_on(eddy::time::timeout(HOUR * 24, std::future::pending::<()>()));
        assert!(res.is_err());
    });
}

#[test]
fn advance_moves_the_clock_by_hand() {
    let rt = paused(1);
    rt.block_on(async {
        let t0 = eddy::time();
        eddy::time::advance(Duration::from_secs(30)).await;
        assert_eq!(eddy::time() - t0, Duration::from_secs(30));
        let (tx, rx) = async_channel::bounded(1);
        eddy::call_later(Duration::from_secs(60), move || tx.try_send(()).unwrap());
        eddy::time::advance(Duration::from_secs(60)).await;
        rx.recv().await.unwrap();
        assert!(eddy::time() - t0 >= Duration::from_secs(90));
    });
}

#[test]
fn the_clock_does_not_move_while_work_is_running() {
    let rt = paused(2);
    rt.block_on(async {
        let t0 = eddy::time();
        // A busy task keeps one worker awake for 100 ms of real time; a timer an hour out
        // must not fire meanwhile (not every worker is idle).
        let busy = eddy::spawn(async {
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(100) {
                eddy::yield_now().await;
            }
            eddy::time()
        });
        let fired_at = Arc::new(Mutex::new(None));
        let f = fired_at.clone();
        eddy::call_later(HOUR, move || *f.lock().unwrap() = Some(eddy::time()));
        let busy_done = busy.await.unwrap();
        assert_eq!(busy_done, t0, "no jump while a worker was busy");
        eddy::time::sleep(HOUR * 2).await;
        assert_eq!(*fired_at.lock().unwrap(), Some(t0 + HOUR));
    });
}

/// Both workers are held, so a spare stands in and runs a job; the workers are then
/// released and go to sleep while the spare is still in that job. Every worker sleeps, but
/// the runtime is not idle: the clock must not jump to the hour-long timer.
#[test]
fn the_clock_does_not_move_while_a_spare_runs_a_job() {
    with_deadline(REAL_LIMIT, || {
        let rt = eddy::Builder::new()
            .workers(2)
            .start_paused(true)
            .thread_name("pcs")
            .build()
            .unwrap();
        // Jobs held on the workers themselves (pinned), not on a spare.
        let anchors = eddy_tests::Anchors::new(&rt, "pcs", 2);
        let handle = rt.handle();
        let t0 = rt.block_on(async { eddy::time() });
        let workers_held: Vec<_> = (0..2)
            .map(|w| {
                let (held, job) = eddy_tests::HeldJob::new();
                anchors.run(w, move || async move { job() });
                held.wait_started();
                held
            })
            .collect();
        // Set while the workers are busy: the clock cannot jump to it before the spare runs.
        let fired = Arc::new(Mutex::new(None));
        let f = fired.clone();
        handle
            .call_later(HOUR, move || *f.lock().unwrap() = Some(eddy::time()))
            .unwrap();
        // A job only a spare can run now; it holds its thread until released.
        let (job, release_job) = eddy_tests::HeldJob::new();
        let spare_job = handle.spawn(async move {
            release_job();
            eddy::time()
        });
        job.wait_started();
        workers_held.iter().for_each(eddy_tests::HeldJob::release);
        assert!(eddy_tests::wait_until_all_workers_sleep(
            &rt,
            Duration::from_secs(30)
        ));
        assert_eq!(*fired.lock().unwrap(), None, "the hour-long timer fired");
        job.release();
        assert_eq!(
            rt.block_on(spare_job).unwrap(),
            t0,
            "the clock jumped while a spare ran a job"
        );
    });
}

#[test]
#[should_panic(expected = "start_paused")]
fn advance_on_a_running_clock_panics() {
    let rt = eddy::Builder::new().workers(1).build().unwrap();
    rt.block_on(eddy::time::advance(Duration::from_secs(1)));
}

/// A blocking job holds the clock (it may be about to set a timer); when it ends with every
/// worker asleep and nothing else to wake them, the clock must still jump.
#[test]
fn the_clock_jumps_once_a_blocking_job_ends_while_everyone_sleeps() {
    with_deadline(REAL_LIMIT, || {
        let rt = Arc::new(paused(2));
        let (release, held) = std::sync::mpsc::channel::<()>();
        let watcher = {
            let rt = rt.clone();
            std::thread::spawn(move || {
                // Release the job only once every worker has gone to sleep, declining to
                // jump because of it.
                assert!(eddy_tests::wait_until_all_workers_sleep(
                    &rt,
                    Duration::from_secs(30)
                ));
                release.send(()).unwrap();
            })
        };
        let slept = rt.block_on(async move {
            let t0 = eddy::time();
            drop(eddy::spawn_blocking(move || held.recv().unwrap()));
            eddy::time::sleep(HOUR).await;
            eddy::time() - t0
        });
        watcher.join().unwrap();
        assert_eq!(slept, HOUR);
    });
}
