//! How workers share IO. A parked worker hands its epoll to a sibling (`worker::handoff`):
//! the sibling serves its IO while it sleeps, and it still wakes for everything else (its
//! own timers, its pinned tasks woken from other threads, shutdown). These tests check that
//! every request is served in each of those states; how many wake-ups the hand-off saves,
//! and when a worker shares IO-woken jobs with a sibling (`worker::pace`), are policies with
//! unit tests of their own and a benchmark (`docs/benchmarks.md`).
//!
//! Worker 0 ("X") owns the sockets in every test; worker 1 ("Y") is its host. Y has no IO
//! sources (but in the last test), so it never becomes a guest itself, and X, having no
//! timers, parks without a deadline: whenever X parks while Y can host, it sleeps as Y's
//! guest. A parked Y without IO of its own cannot become X's host (`handoff::can_host`), so
//! the tests keep Y awake while X goes to sleep as its guest (`park_x_as_guest`); once X is
//! its guest, Y may park too and go on hosting it.

use std::future::Future;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread::ThreadId;
use std::time::Duration;

use eddy::net::UnixStream;
use eddy_tests::{wait_until, wait_until_all_workers_sleep, with_deadline, Anchors, PATIENCE};

/// Long enough for a broken hand-off to fail instead of hang.
const LIMIT: Duration = Duration::from_secs(120);

const X: usize = 0;
const Y: usize = 1;

/// A runtime of `workers` workers named "io-N", with an anchor on each.
fn runtime(workers: usize) -> (eddy::Runtime, Anchors) {
    let rt = eddy::Builder::new()
        .workers(workers)
        .thread_name("io")
        .build()
        .unwrap();
    let anchors = Anchors::new(&rt, "io", workers);
    (rt, anchors)
}

/// Registers `pairs` socket pairs with the poller of worker `x` and starts a stealable echo
/// task for each, which runs `work` on every message before echoing it. Returns X's thread
/// and the peers' ends.
fn echo_sockets_on(
    anchors: &Anchors,
    x: usize,
    pairs: usize,
    work: impl Fn() + Clone + Send + 'static,
) -> (ThreadId, Vec<StdUnixStream>) {
    let (tx, rx) = mpsc::channel();
    anchors.run(x, move || async move {
        let mut peers = Vec::new();
        for _ in 0..pairs {
            let (ours, theirs) = StdUnixStream::pair().unwrap();
            let ours = UnixStream::from_std(ours).unwrap();
            // IO objects register on first use: poll one read here, on this worker.
            {
                let mut probe = [0u8; 1];
                let mut first = std::pin::pin!(ours.read(&mut probe));
                let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                assert!(first.as_mut().poll(&mut cx).is_pending());
            }
            let work = work.clone();
            drop(eddy::spawn(async move {
                let mut buf = [0u8; 64];
                loop {
                    match ours.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            work();
                            ours.write_all(&buf[..n]).await.unwrap()
                        }
                    }
                }
            }));
            peers.push(theirs);
        }
        tx.send((std::thread::current().id(), peers)).unwrap();
    });
    rx.recv().unwrap()
}

fn echo_sockets(anchors: &Anchors, x: usize, pairs: usize) -> (ThreadId, Vec<StdUnixStream>) {
    echo_sockets_on(anchors, x, pairs, || ())
}

/// Keeps worker `y` awake with a pinned `yield_now` loop until `stop`; returns once it runs.
fn keep_awake(anchors: &Anchors, y: usize, stop: Arc<AtomicBool>) {
    let (started_tx, started) = mpsc::channel();
    anchors.run(y, move || async move {
        let _ = started_tx.send(());
        while !stop.load(Ordering::Relaxed) {
            eddy::yield_now().await;
        }
    });
    started.recv().unwrap();
}

/// Guest parks of worker `w` so far.
fn guest_parks(rt: &eddy::Runtime, w: usize) -> u64 {
    rt.metrics().workers[w].guest_parks
}

/// Waits until worker `w` sleeps in a guest park begun after `after` guest parks.
fn wait_for_guest_park(rt: &eddy::Runtime, w: usize, after: u64) {
    let asleep_as_guest = || {
        let m = &rt.metrics().workers[w];
        m.guest_parks > after && m.parks == m.wakeups + 1
    };
    assert!(
        wait_until(PATIENCE, asleep_as_guest),
        "worker {w} never went to sleep as a guest"
    );
}

/// With Y awake (kept so by the caller): wakes X and waits until it sleeps as Y's guest, in a
/// guest park begun after `after` guest parks. X may have parked on its own epoll while Y
/// was parked, and would stay there until something woke it.
fn park_x_as_guest(rt: &eddy::Runtime, anchors: &Anchors, after: u64) {
    anchors.run(X, || async {});
    wait_for_guest_park(rt, X, after);
}

/// X goes to sleep as Y's guest (Y kept awake meanwhile), then Y is let go to park too,
/// still hosting X.
fn x_guest_of_y_then_y_parks(rt: &eddy::Runtime, anchors: &Anchors) {
    let stop = Arc::new(AtomicBool::new(false));
    keep_awake(anchors, Y, stop.clone());
    park_x_as_guest(rt, anchors, 0);
    stop.store(true, Ordering::Relaxed);
}

/// One request and its echo on `peer`; panics if no echo comes back.
fn round_trip(peer: &mut StdUnixStream) {
    peer.set_read_timeout(Some(PATIENCE)).unwrap();
    peer.write_all(b"ping").unwrap();
    let mut buf = [0u8; 4];
    peer.read_exact(&mut buf)
        .expect("an echo did not come back");
    assert_eq!(&buf, b"ping");
}

/// X sleeps as the guest of an awake Y: Y serves X's sockets, and every request is answered.
#[test]
fn the_sockets_of_a_guest_are_served_while_it_sleeps() {
    with_deadline(LIMIT, || {
        let (rt, anchors) = runtime(2);
        let (_, mut peers) = echo_sockets(&anchors, X, 4);
        let stop = Arc::new(AtomicBool::new(false));
        keep_awake(&anchors, Y, stop.clone());
        park_x_as_guest(&rt, &anchors, 0);
        for i in 0..400 {
            let n = peers.len();
            round_trip(&mut peers[i % n]);
        }
        stop.store(true, Ordering::Relaxed);
    });
}

/// Waits until every worker sleeps, then makes one round trip on `peer`.
fn round_trip_with_all_asleep(rt: &eddy::Runtime, peer: &mut StdUnixStream) {
    assert!(
        wait_until_all_workers_sleep(rt, PATIENCE),
        "the workers did not go to sleep"
    );
    round_trip(peer);
}

/// X sleeps as Y's guest and then Y parks too: Y's epoll, with X's nested in it, is the only
/// one anybody waits on. Requests are still answered, each sent with both workers asleep,
/// also after Y, woken only for X's events many times in a row, gives up hosting X and X
/// waits on its own epoll again (`PASS_HOSTING_AFTER` is 64).
#[test]
fn io_of_a_guest_is_served_when_every_worker_sleeps() {
    with_deadline(LIMIT, || {
        let (rt, anchors) = runtime(2);
        let (_, mut peers) = echo_sockets(&anchors, X, 2);
        x_guest_of_y_then_y_parks(&rt, &anchors);
        for i in 0..200 {
            let n = peers.len();
            round_trip_with_all_asleep(&rt, &mut peers[i % n]);
        }
    });
}

/// A guest still wakes for what is its own: a timer of a task pinned to it (with its host
/// asleep too, so that nobody else fires it), a pinned task woken from a foreign thread,
/// and shutdown.
#[test]
fn a_guest_still_runs_its_pinned_tasks_when_they_are_woken() {
    with_deadline(LIMIT, || {
        let (rt, anchors) = runtime(2);
        let (x_thread, _peers) = echo_sockets(&anchors, X, 2);
        let asleep = |w: usize| {
            let m = &rt.metrics().workers[w];
            m.parks == m.wakeups + 1
        };

        // Both asleep, X as Y's guest (the only host it can have).
        x_guest_of_y_then_y_parks(&rt, &anchors);
        assert!(wait_until_all_workers_sleep(&rt, PATIENCE));
        // A pinned task of X sleeps on X's timer heap; X goes back to sleep as Y's guest,
        // now with a deadline, and only X's own park can end for it.
        let (reply_tx, reply_rx) = mpsc::channel::<(&'static str, ThreadId)>();
        let reply = reply_tx.clone();
        anchors.run(X, move || async move {
            eddy::time::sleep(Duration::from_millis(50)).await;
            let _ = reply.send(("timer", std::thread::current().id()));
        });
        assert_eq!(
            reply_rx.recv_timeout(PATIENCE).unwrap(),
            ("timer", x_thread)
        );

        // A pinned task of X woken from this thread while X sleeps as a guest again (of an
        // awake Y: having taken its epoll back for the timer, X cannot go back to a parked
        // Y without IO).
        // The task takes X's anchor until it is woken, so it wakes X for the last time
        // before that.
        let stop = Arc::new(AtomicBool::new(false));
        keep_awake(&anchors, Y, stop.clone());
        let before = guest_parks(&rt, X);
        let (wake_tx, wake_rx) = async_channel::bounded::<()>(1);
        anchors.run(X, move || async move {
            wake_rx.recv().await.unwrap();
            let _ = reply_tx.send(("message", std::thread::current().id()));
        });
        wait_for_guest_park(&rt, X, before);
        wake_tx.send_blocking(()).unwrap();
        assert_eq!(
            reply_rx.recv_timeout(PATIENCE).unwrap(),
            ("message", x_thread)
        );
        stop.store(true, Ordering::Relaxed);

        // And shutdown reaches it: dropping the runtime returns (the test's limit catches a
        // worker that never hears of it).
        assert!(
            wait_until(PATIENCE, || asleep(X)),
            "X did not go back to sleep"
        );
        drop(anchors);
        drop(rt);
    });
}

/// Y runs long cycles (100 pinned tasks of 100 µs jobs) and never parks, so it harvests X's
/// epoll only between cycles or when it notices that it lags: every request is answered all
/// the same.
#[test]
fn a_busy_host_still_serves_its_guests_io() {
    with_deadline(LIMIT, || {
        let (rt, anchors) = runtime(2);
        let (_, mut peers) = echo_sockets(&anchors, X, 1);
        let stop = Arc::new(AtomicBool::new(false));
        let spinners_stop = stop.clone();
        let (started_tx, started) = mpsc::channel();
        anchors.run(Y, move || async move {
            for _ in 0..100 {
                let stop = spinners_stop.clone();
                drop(eddy::spawn_local(async move {
                    while !stop.load(Ordering::Relaxed) {
                        eddy_tests::spin_for(Duration::from_micros(100));
                        eddy::yield_now().await;
                    }
                }));
            }
            let _ = started_tx.send(());
        });
        started.recv().unwrap();
        park_x_as_guest(&rt, &anchors, 0);
        for _ in 0..50 {
            round_trip(&mut peers[0]);
        }
        stop.store(true, Ordering::Relaxed);
    });
}

/// IO-woken jobs do not wait behind a long one: two echo tasks on X's sockets each wait, on
/// receiving their message, until the other runs too. They can only both finish if a sibling
/// takes one of them while X is busy with the other.
#[test]
fn io_jobs_queued_behind_a_long_io_job_are_taken_by_a_sibling() {
    with_deadline(LIMIT, || {
        let (_rt, anchors) = runtime(2);
        for _ in 0..10 {
            let barrier = Arc::new(Barrier::new(2));
            let (_, mut peers) = echo_sockets_on(&anchors, X, 2, move || {
                barrier.wait();
            });
            for p in peers.iter_mut() {
                p.write_all(b"ping").unwrap();
            }
            for p in peers.iter_mut() {
                p.set_read_timeout(Some(PATIENCE)).unwrap();
                let mut buf = [0u8; 4];
                p.read_exact(&mut buf)
                    .expect("an IO job was stranded behind another");
            }
        }
    });
}

/// Four workers handing their epolls around while clients come and go: every request of
/// 16 connections, on sockets spread over the workers, gets its echo (20,000 in all). The
/// clients pause now and then, so that workers park (and hand off) between bursts.
#[test]
fn no_request_is_lost_while_four_workers_hand_off_their_epolls() {
    with_deadline(LIMIT, || {
        let rt = eddy::Builder::new().workers(4).build().unwrap();
        // Sockets registered from the block_on thread land on the workers round-robin.
        let peers: Vec<StdUnixStream> = rt.block_on(async {
            (0..16)
                .map(|_| {
                    let (ours, theirs) = StdUnixStream::pair().unwrap();
                    let ours = UnixStream::from_std(ours).unwrap();
                    drop(eddy::spawn(async move {
                        let mut buf = [0u8; 64];
                        loop {
                            match ours.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => ours.write_all(&buf[..n]).await.unwrap(),
                            }
                        }
                    }));
                    theirs
                })
                .collect()
        });
        let clients: Vec<_> = peers
            .into_iter()
            .enumerate()
            .map(|(i, mut peer)| {
                std::thread::spawn(move || {
                    for j in 0..1_250 {
                        // The shape of the load, not a synchronisation: pauses let workers
                        // go idle mid-run.
                        if (i + j) % 97 == 0 {
                            std::thread::sleep(Duration::from_millis(3));
                        }
                        round_trip(&mut peer);
                    }
                })
            })
            .collect();
        for c in clients {
            c.join().expect("a client lost a request");
        }
        // Every worker has sources: the first to go idle hands its epoll to a sibling.
        let handed_off = wait_until(PATIENCE, || {
            rt.metrics().workers.iter().any(|w| w.guest_parks > 0)
        });
        assert!(handed_off, "no worker ever parked as a guest");
    });
}

/// The host is stuck in one job, held until the test is done, while its guest's socket gets
/// a request: a host with guests counts as having IO, so the guest is woken, takes its
/// epoll back and answers while the host is still stuck.
#[test]
fn a_guest_of_a_stuck_host_is_woken_for_its_io() {
    with_deadline(LIMIT, || {
        let (rt, anchors) = runtime(2);
        let (_, mut peers) = echo_sockets(&anchors, X, 1);
        let (stuck_tx, stuck) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        anchors.run(Y, move || async move {
            let _ = stuck_tx.send(());
            let _ = released.recv_timeout(PATIENCE);
        });
        stuck.recv().unwrap();
        park_x_as_guest(&rt, &anchors, 0);
        round_trip(&mut peers[0]);
        drop(release);
    });
}

/// `add_reader` fds are level-triggered; on a guest's epoll they still fire once per
/// arrival (the callback drains the fd), served while the guest sleeps.
#[test]
fn add_reader_callbacks_of_a_guest_still_run() {
    use std::os::fd::AsRawFd;
    with_deadline(LIMIT, || {
        let (rt, anchors) = runtime(2);
        let (ours, mut theirs) = StdUnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let (got_tx, got_rx) = mpsc::channel::<usize>();
        let (added_tx, added) = mpsc::channel();
        anchors.run(X, move || async move {
            let fd = ours.as_raw_fd();
            eddy::add_reader(fd, move || {
                let mut buf = [0u8; 64];
                while let Ok(n) = (&ours).read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let _ = got_tx.send(n);
                }
            })
            .unwrap();
            let _ = added_tx.send(());
        });
        added.recv().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        keep_awake(&anchors, Y, stop.clone());
        park_x_as_guest(&rt, &anchors, 0);
        for _ in 0..100 {
            theirs.write_all(b"ping").unwrap();
            let n = got_rx
                .recv_timeout(PATIENCE)
                .expect("an add_reader callback did not run");
            assert_eq!(n, 4);
        }
        stop.store(true, Ordering::Relaxed);
    });
}

/// Y has a socket of its own, and hosts X while both sleep. Woken only for X's events many
/// times in a row (`PASS_HOSTING_AFTER` is 64), Y swaps roles with X: Y's epoll goes into
/// X's, X is woken to wait on its own epoll, and Y sleeps as X's guest. Every request is
/// answered before, across and after the swap, on X's sockets and on Y's.
#[test]
fn requests_are_answered_across_a_host_passing_the_hosting_to_its_guest() {
    with_deadline(LIMIT, || {
        let (rt, anchors) = runtime(2);
        let (_, mut x_peers) = echo_sockets(&anchors, X, 2);
        x_guest_of_y_then_y_parks(&rt, &anchors);
        // Y's socket comes once X is its guest: an awake Y with sockets could be rescued
        // by X when its thread waits for a CPU (X would then host Y, not sleep as its guest).
        let (_, mut y_peers) = echo_sockets(&anchors, Y, 1);
        for i in 0..200 {
            let n = x_peers.len();
            round_trip_with_all_asleep(&rt, &mut x_peers[i % n]);
        }
        for _ in 0..20 {
            round_trip_with_all_asleep(&rt, &mut y_peers[0]);
            round_trip(&mut x_peers[0]);
        }
    });
}
