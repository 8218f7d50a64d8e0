//! IO of a stuck worker: data arriving on a socket registered on a worker that is busy in a
//! 500 ms callback is read by a sibling long before the callback ends.

use std::future::Future;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use eddy::net::UnixStream;

#[test]
fn a_sibling_serves_the_io_of_a_stuck_worker() {
    let rt = eddy::Builder::new().workers(2).build().unwrap();
    let (tx, rx) = mpsc::channel::<(&'static str, Instant)>();
    let (mut peer_tx, peer_rx) = mpsc::channel::<std::os::unix::net::UnixStream>();
    let _ = &mut peer_tx;
    rt.handle()
        .call_soon_threadsafe(move || {
            // On a worker: register the socket here, start the reading task here, then
            // block this worker for 500 ms.
            let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
            let ours = UnixStream::from_std(ours).unwrap();
            // Register the socket with *this* worker's poller (IO objects register on first
            // use): poll one read attempt here, with a waker that does nothing.
            {
                let mut probe = [0u8; 1];
                let mut first = std::pin::pin!(ours.read(&mut probe));
                let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                assert!(first.as_mut().poll(&mut cx).is_pending());
            }
            let tx2 = tx.clone();
            drop(eddy::spawn(async move {
                let mut buf = [0u8; 4];
                ours.read_exact(&mut buf).await.unwrap();
                tx2.send(("data read", Instant::now())).unwrap();
            }));
            peer_tx.send(theirs).unwrap();
            std::thread::sleep(Duration::from_millis(500));
            tx.send(("callback ended", Instant::now())).unwrap();
        })
        .unwrap();
    let theirs = peer_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    // Give the reading task a moment to be queued, then send while the worker is stuck.
    std::thread::sleep(Duration::from_millis(50));
    let sent = Instant::now();
    std::io::Write::write_all(&mut &theirs, b"ping").unwrap();
    let (first, at) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    let (second, _) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!((first, second), ("data read", "callback ended"));
    let latency = at - sent;
    assert!(
        latency < Duration::from_millis(200),
        "the data waited {latency:?} for the stuck worker"
    );
}
