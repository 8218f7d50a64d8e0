//! asyncio's `add_reader` / `remove_reader` / `add_writer` / `remove_writer`, and `Async<T>`.
//!
//! The watcher tests use one worker, so that every watched fd is on one poller and callbacks
//! run in loop cycles one after the other: what a cycle queued has run before the next cycle
//! harvests again. That is what [`two_loop_cycles`] waits for, instead of a sleep, before it
//! checks that a callback was *not* called.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use eddy_tests::{wait_until, with_deadline, PATIENCE};

fn rt() -> eddy::Runtime {
    eddy_tests::rt(1)
}

fn wait_for(what: &str, cond: impl FnMut() -> bool) {
    assert!(wait_until(PATIENCE, cond), "timed out waiting for {what}");
}

/// Waits until the only worker of `rt` has harvested its IO and run what that queued in two
/// loop cycles that began after this call, through a writer on a fresh (always writable)
/// socket: a level-triggered writer is called once per cycle. Any callback the poller
/// reports at all was reported in the first of them and has run by the end of the second.
fn two_loop_cycles(rt: &eddy::Runtime) {
    let (probe, _peer) = UnixStream::pair().unwrap();
    let fd = probe.as_raw_fd();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    rt.block_on(async move {
        eddy::add_writer(fd, move || {
            c.fetch_add(1, Ordering::SeqCst);
        })
    })
    .unwrap();
    wait_for("two loop cycles", || calls.load(Ordering::SeqCst) >= 2);
    assert!(rt.block_on(async move { eddy::remove_writer(fd) }).unwrap());
}

/// A reader is called once per cycle while its fd is readable and never while it is not;
/// adding a reader again replaces the callback; a removed reader is not called.
#[test]
fn reader_is_called_while_readable_and_replaced_on_re_add() {
    with_deadline(PATIENCE, || {
        let rt = rt();
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
        two_loop_cycles(&rt);
        assert_eq!(first.load(Ordering::SeqCst), 0, "not readable yet");
        b.write_all(b"x").unwrap();
        wait_for("repeated calls", || first.load(Ordering::SeqCst) >= 3);

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
        // A call of the old reader queued before the replacement runs in that same cycle,
        // before the new reader's first call.
        wait_for("the new reader", || second.load(Ordering::SeqCst) == 1);
        let frozen = first.load(Ordering::SeqCst);
        b.write_all(b"yz").unwrap();
        wait_for("more data", || second.load(Ordering::SeqCst) == 3);
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
        two_loop_cycles(&rt);
        assert_eq!(
            second.load(Ordering::SeqCst),
            3,
            "a removed reader is not called"
        );
    });
}

/// A reader and a writer on one fd are called for their own direction only, and removing
/// one leaves the other.
#[test]
fn writer_and_reader_on_one_fd_are_independent() {
    with_deadline(PATIENCE, || {
        let rt = rt();
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
        wait_for("writable", || writes.load(Ordering::SeqCst) > 0);
        two_loop_cycles(&rt);
        assert_eq!(reads.load(Ordering::SeqCst), 0, "not readable yet");
        assert!(rt.block_on(async move { eddy::remove_writer(fd) }).unwrap());
        // A call already queued when remove_writer returned may still run in its cycle.
        two_loop_cycles(&rt);
        let w_before = writes.load(Ordering::SeqCst);
        b.write_all(b"r").unwrap();
        wait_for("readable", || reads.load(Ordering::SeqCst) > 0);
        two_loop_cycles(&rt);
        assert_eq!(
            writes.load(Ordering::SeqCst),
            w_before,
            "the writer was removed"
        );
        assert!(rt.block_on(async move { eddy::remove_reader(fd) }).unwrap());
        assert!(!rt.block_on(async move { eddy::remove_writer(fd) }).unwrap());
        drop(a);
    });
}

/// `add_reader` outside a runtime is an error, not a panic.
#[test]
fn outside_a_runtime_add_reader_is_an_error() {
    let (a, _b) = UnixStream::pair().unwrap();
    let err = eddy::add_reader(a.as_raw_fd(), || ()).unwrap_err();
    assert!(err.to_string().contains("no eddy runtime"), "{err}");
}

/// `Async<T>` moves 100,000 bytes between the two ends of a socket pair, in order, and gives
/// the fd back with `into_inner`.
#[test]
fn async_wrapper_reads_and_writes_any_fd() {
    use eddy::io::Async;
    with_deadline(PATIENCE, || {
        eddy_tests::rt(2).block_on(async {
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
            assert_eq!(got.len(), 100_000);
            assert!(got.iter().enumerate().all(|(i, b)| *b == i as u8));
            b.writable().await.unwrap();
            let inner = b.into_inner().unwrap();
            drop(inner);
        })
    });
}
