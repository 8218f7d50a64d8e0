//! Signals on the reactor. Each test sends signals to this process, so they live in their
//! own test binary; a listener is always registered before the signal is raised.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy::signal::{add_signal_handler, remove_signal_handler, signal, SignalKind};

fn raise(sig: i32) {
    // SAFETY: raise(2) has no memory-safety preconditions.
    assert_eq!(unsafe { libc::raise(sig) }, 0);
}

fn rt() -> eddy::Runtime {
    eddy::Builder::new().workers(2).build().unwrap()
}

#[test]
fn signal_recv_sees_each_delivery() {
    let rt = rt();
    rt.block_on(async {
        let mut usr1 = signal(SignalKind::user_defined1()).unwrap();
        for _ in 0..3 {
            raise(libc::SIGUSR1);
            eddy::time::timeout(Duration::from_secs(5), usr1.recv())
                .await
                .expect("delivery not seen")
                .unwrap();
        }
        // Nothing more pending.
        let more = eddy::time::timeout(Duration::from_millis(50), usr1.recv()).await;
        assert!(more.is_err());
    });
}

#[test]
fn ctrl_c_completes_on_sigint() {
    let rt = rt();
    rt.block_on(async {
        let waiter = eddy::spawn(eddy::signal::ctrl_c());
        // Wait until the listener is registered (the task has been polled once).
        eddy::time::sleep(Duration::from_millis(50)).await;
        raise(libc::SIGINT);
        eddy::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("ctrl_c did not complete")
            .unwrap()
            .unwrap();
    });
}

#[test]
fn handlers_run_on_a_worker_and_can_be_removed() {
    let rt = rt();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let workers = Arc::new(std::sync::Mutex::new(Vec::new()));
    let w = workers.clone();
    rt.block_on(async move {
        add_signal_handler(SignalKind::user_defined2(), move || {
            c.fetch_add(1, Ordering::SeqCst);
            w.lock()
                .unwrap()
                .push(std::thread::current().name().map(String::from));
        })
    })
    .unwrap();
    raise(libc::SIGUSR2);
    let deadline = Instant::now() + Duration::from_secs(5);
    while calls.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "handler not called");
        std::thread::sleep(Duration::from_millis(2));
    }
    let name = workers.lock().unwrap()[0].clone().unwrap_or_default();
    assert!(name.starts_with("eddy-worker"), "{name}");
    assert!(rt
        .block_on(async { remove_signal_handler(SignalKind::user_defined2()) })
        .unwrap());
    assert!(!rt
        .block_on(async { remove_signal_handler(SignalKind::user_defined2()) })
        .unwrap());
}

#[test]
fn uncatchable_signals_are_an_error() {
    let rt = rt();
    rt.block_on(async {
        let err = signal(SignalKind::from_raw(libc::SIGKILL)).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    });
}
