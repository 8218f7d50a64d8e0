//! IO of a stuck worker: data arriving on a socket registered on a worker that is stuck in a
//! long job is read by a sibling while the job goes on, and the sibling still reads its own.

use std::future::Future;
use std::io::Write;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use eddy::net::UnixStream;
use eddy_tests::{wait_until, with_deadline, Anchors, PATIENCE};

/// Registers `ours` with the poller of the worker this runs on (IO objects register on first
/// use) by polling one read attempt, with a waker that does nothing. The socket must be empty.
fn register_here(ours: &UnixStream) {
    let mut probe = [0u8; 1];
    let mut first = pin!(ours.read(&mut probe));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(first.as_mut().poll(&mut cx).is_pending());
}

/// A socket registered with worker `worker`'s poller, and a stealable task whose read of
/// four bytes from it is pending; returns the peer to write to and where the four bytes
/// arrive once read.
fn waiting_reader(anchors: &Anchors, worker: usize) -> (StdUnixStream, mpsc::Receiver<[u8; 4]>) {
    let (peer_tx, peer_rx) = mpsc::channel();
    let (pending_tx, pending_rx) = mpsc::channel();
    let (read_tx, read_rx) = mpsc::channel();
    anchors.run(worker, move || async move {
        let (ours, theirs) = StdUnixStream::pair().unwrap();
        let ours = UnixStream::from_std(ours).unwrap();
        register_here(&ours);
        drop(eddy::spawn(async move {
            let mut buf = [0u8; 4];
            {
                let mut read = pin!(ours.read_exact(&mut buf));
                let mut told = false;
                std::future::poll_fn(|cx| {
                    let r = read.as_mut().poll(cx);
                    if r.is_pending() && !told {
                        told = true;
                        let _ = pending_tx.send(());
                    }
                    r
                })
                .await
                .unwrap();
            }
            let _ = read_tx.send(buf);
        }));
        peer_tx.send(theirs).unwrap();
    });
    let theirs = peer_rx.recv().unwrap();
    pending_rx
        .recv_timeout(PATIENCE)
        .expect("the reader never polled its read");
    (theirs, read_rx)
}

/// The reading task has registered its interest (its read is pending) before the worker that
/// owns the socket gets stuck, and the data arrives only then: nothing but a sibling
/// harvesting the stuck worker's poller can wake the reader. The stuck job waits for the
/// reader to report.
#[test]
fn a_sibling_serves_the_io_of_a_stuck_worker() {
    with_deadline(Duration::from_secs(90), || {
        let rt = eddy::Builder::new()
            .workers(2)
            .thread_name("io")
            .build()
            .unwrap();
        let anchors = Anchors::new(&rt, "io", 2);
        let (theirs, read_rx) = waiting_reader(&anchors, 0);

        // Worker 0 gets stuck until the reader has read.
        let (stuck_tx, stuck_rx) = mpsc::channel();
        let (result_tx, result_rx) = mpsc::channel();
        anchors.run(0, move || async move {
            let _ = stuck_tx.send(());
            let _ = result_tx.send(read_rx.recv_timeout(PATIENCE).ok());
        });
        stuck_rx.recv().unwrap();
        std::io::Write::write_all(&mut &theirs, b"ping").unwrap();
        let read = result_rx.recv().unwrap();
        assert_eq!(read, Some(*b"ping"), "the data waited for the stuck worker");
        drop(anchors);
    });
}

/// A worker that finds work at a stuck sibling in every cycle still reads its own sockets.
/// Worker 0 is held in a job; two tasks bounce a byte between two socket pairs registered
/// with worker 0's poller, so each hop wakes the next only through that poller, and worker 1
/// (idle otherwise) finds the next hop there in every cycle. A socket registered with worker
/// 1's own poller must still be read while the bouncing goes on; worker 0 is released only
/// after that, or when the test gives up.
#[test]
fn a_worker_serving_a_stuck_siblings_io_still_reads_its_own() {
    with_deadline(Duration::from_secs(90), || {
        // No spares: one standing in for a worker 1 that looks stuck would read its socket.
        let rt = eddy::Builder::new()
            .workers(2)
            .spare_workers(0)
            .thread_name("own")
            .build()
            .unwrap();
        let anchors = Anchors::new(&rt, "own", 2);

        // Worker 1's own socket, with a reader waiting on it.
        let (theirs, read_rx) = waiting_reader(&anchors, 1);

        // Two bouncers on worker 0's poller: each reads a byte and writes one to the other.
        let hops = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (kick_tx, kick_rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let (hops2, stop2) = (hops.clone(), stop.clone());
        anchors.run(0, move || async move {
            let (a_write, a_read) = StdUnixStream::pair().unwrap();
            let (b_write, b_read) = StdUnixStream::pair().unwrap();
            let a_read = UnixStream::from_std(a_read).unwrap();
            let b_read = UnixStream::from_std(b_read).unwrap();
            register_here(&a_read);
            register_here(&b_read);
            kick_tx.send(a_write.try_clone().unwrap()).unwrap();
            for (from, mut to) in [(a_read, b_write), (b_read, a_write)] {
                let (hops, stop) = (hops2.clone(), stop2.clone());
                drop(eddy::spawn(async move {
                    let mut byte = [0u8; 1];
                    while from.read_exact(&mut byte).await.is_ok() && !stop.load(Ordering::SeqCst) {
                        hops.fetch_add(1, Ordering::SeqCst);
                        // One byte into an empty socket buffer: never blocks.
                        to.write_all(&byte).unwrap();
                    }
                }));
            }
            ready_tx.send(()).unwrap();
        });
        let mut kick = kick_rx.recv().unwrap();
        ready_rx.recv().unwrap();

        // Worker 0 is held until the test lets it go, or gives up (dropping `release_tx`).
        let (held_tx, held_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        anchors.run(0, move || async move {
            let _ = held_tx.send(());
            let _ = release_rx.recv();
        });
        held_rx.recv().unwrap();
        kick.write_all(b"x").unwrap();
        assert!(
            wait_until(PATIENCE, || hops.load(Ordering::SeqCst) >= 1000),
            "worker 1 did not serve the held worker's IO"
        );

        (&theirs).write_all(b"ping").unwrap();
        let read = read_rx.recv_timeout(PATIENCE).ok();
        stop.store(true, Ordering::SeqCst);
        drop(release_tx);
        assert_eq!(
            read,
            Some(*b"ping"),
            "worker 1 left its own socket unread while it served its held sibling"
        );
        drop(anchors);
    });
}
