//! asyncio's `add_reader` / `remove_reader` / `add_writer` / `remove_writer`, and `Async<T>`.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn reader_is_called_while_readable_and_replaced_on_re_add() {
    let rt = eddy::Builder::new().workers(2).build().unwrap();
    let (a, mut b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    let fd = a.as_raw_fd();
    let a = Arc::new(a);
    let first = Arc::new(AtomicUsize::new(0));
    let second = Arc::new(AtomicUsize::new(0));

    // Level-triggered: a reader that does not consume keeps being called, once per cycle.
    let f = first.clone();
    rt.block_on(async move {
        eddy::add_reader(fd, move || {
            f.fetch_add(1, Ordering::SeqCst);
        })
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(first.load(Ordering::SeqCst), 0, "not readable yet");
    b.write_all(b"x").unwrap();
    wait_until("repeated calls", || first.load(Ordering::SeqCst) >= 3);

    // Re-adding replaces: the old callback stops, the new one drains the fd.
    let (s, a2) = (second.clone(), a.clone());
    rt.block_on(async move {
        eddy::add_reader(fd, move || {
            let mut buf = [0u8; 16];
            while let Ok(n) = (&*a2).read(&mut buf) {
                if n == 0 {
                    break;
                }
                s.fetch_add(n, Ordering::SeqCst);
            }
        })
    })
    .unwrap();
    wait_until("the new reader", || second.load(Ordering::SeqCst) == 1);
    let frozen = first.load(Ordering::SeqCst);
    b.write_all(b"yz").unwrap();
    wait_until("more data", || second.load(Ordering::SeqCst) == 3);
    assert_eq!(
        first.load(Ordering::SeqCst),
        frozen,
        "the replaced reader never runs again"
    );

    assert!(rt.block_on(async move { eddy::remove_reader(fd) }).unwrap());
    assert!(
        !rt.block_on(async move { eddy::remove_reader(fd) }).unwrap(),
        "nothing left"
    );
    b.write_all(b"after").unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        second.load(Ordering::SeqCst),
        3,
        "a removed reader is not called"
    );
}

#[test]
fn writer_and_reader_on_one_fd_are_independent() {
    let rt = eddy::Builder::new().workers(1).build().unwrap();
    let (a, mut b) = UnixStream::pair().unwrap();
    let fd = a.as_raw_fd();
    let writes = Arc::new(AtomicUsize::new(0));
    let reads = Arc::new(AtomicUsize::new(0));
    let (w, r) = (writes.clone(), reads.clone());
    rt.block_on(async move {
        eddy::add_writer(fd, move || {
            w.fetch_add(1, Ordering::SeqCst);
        })?;
        eddy::add_reader(fd, move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
    })
    .unwrap();
    wait_until("writable", || writes.load(Ordering::SeqCst) > 0);
    assert_eq!(reads.load(Ordering::SeqCst), 0);
    assert!(rt.block_on(async move { eddy::remove_writer(fd) }).unwrap());
    // A call already under way when remove_writer returned may still finish; none may start.
    std::thread::sleep(Duration::from_millis(20));
    let w_before = writes.load(Ordering::SeqCst);
    b.write_all(b"r").unwrap();
    wait_until("readable", || reads.load(Ordering::SeqCst) > 0);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        writes.load(Ordering::SeqCst),
        w_before,
        "the writer was removed"
    );
    assert!(rt.block_on(async move { eddy::remove_reader(fd) }).unwrap());
    assert!(!rt.block_on(async move { eddy::remove_writer(fd) }).unwrap());
    drop(a);
}

#[test]
fn outside_a_runtime_add_reader_is_an_error() {
    let (a, _b) = UnixStream::pair().unwrap();
    let err = eddy::add_reader(a.as_raw_fd(), || ()).unwrap_err();
    assert!(err.to_string().contains("no eddy runtime"), "{err}");
}

#[test]
fn async_wrapper_reads_and_writes_any_fd() {
    use eddy::io::Async;
    let rt = eddy::Builder::new().workers(2).build().unwrap();
    rt.block_on(async {
        let (a, b) = UnixStream::pair().unwrap();
        let (a, b) = (Async::new(a).unwrap(), Async::new(b).unwrap());
        let reader = async {
            let mut got = Vec::new();
            let mut buf = [0u8; 1000];
            while got.len() < 100_000 {
                let n = a.read_with(|s| (&*s).read(&mut buf)).await.unwrap();
                got.extend_from_slice(&buf[..n]);
            }
            got
        };
        let writer = async {
            let data: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
            let mut off = 0;
            while off < data.len() {
                off += b.write_with(|s| (&*s).write(&data[off..])).await.unwrap();
            }
        };
        let (got, ()) = futures_lite::future::zip(reader, writer).await;
        assert!(got.iter().enumerate().all(|(i, b)| *b == i as u8));
        b.writable().await.unwrap();
        let inner = b.into_inner().unwrap();
        drop(inner);
    });
}
