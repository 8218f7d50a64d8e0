//! IO of a stuck worker: data arriving on a socket registered on a worker that is stuck in a
//! long job is read by a sibling while the job goes on.

use std::future::Future;
use std::pin::pin;
use std::sync::mpsc;
use std::time::Duration;

use eddy::net::UnixStream;
use eddy_tests::{with_deadline, Anchors, PATIENCE};

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
        let (peer_tx, peer_rx) = mpsc::channel();
        let (pending_tx, pending_rx) = mpsc::channel();
        let (read_tx, read_rx) = mpsc::channel();
        anchors.run(0, move || async move {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
            let ours = UnixStream::from_std(ours).unwrap();
            // Register the socket with this worker's poller (IO objects register on first
            // use): poll one read attempt here, with a waker that does nothing.
            {
                let mut probe = [0u8; 1];
                let mut first = pin!(ours.read(&mut probe));
                let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                assert!(first.as_mut().poll(&mut cx).is_pending());
            }
            // A stealable reader: it tells the test once its read is pending.
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
