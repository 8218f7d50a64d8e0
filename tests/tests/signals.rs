//! Signals on the reactor. Every test that raises a signal runs in a child process
//! ([`run_child_test`]): the default action of `SIGINT`, `SIGUSR1` and `SIGUSR2` terminates the
//! process, so a listener that is not registered yet when the signal comes kills only the
//! child, and the parent reports it as a failure. A listener is always registered before
//! the signal is raised: `signal()` and `add_signal_handler()` register at once, and the
//! future of `ctrl_c()` is polled by hand until it is pending.

use std::os::unix::process::ExitStatusExt;
use std::pin::pin;
use std::sync::mpsc;

use eddy::signal::{add_signal_handler, remove_signal_handler, signal, SignalKind};
use eddy_tests::{assert_child_test_passes, is_child, run_child_test, with_deadline, PATIENCE};
use futures_lite::future::poll_once;

fn raise(sig: i32) {
    // SAFETY: raise(2) has no memory-safety preconditions.
    assert_eq!(unsafe { libc::raise(sig) }, 0);
}

/// Each delivery of a signal completes one `recv`; once the deliveries are consumed, `recv`
/// waits (a raise delivers to the raising thread before it returns, so its byte is already in
/// the self-pipe when `recv` is polled).
#[test]
fn signal_recv_sees_each_delivery() {
    assert_child_test_passes("child_signal_recv_sees_each_delivery");
}

#[test]
#[ignore = "run in a child process by signal_recv_sees_each_delivery"]
fn child_signal_recv_sees_each_delivery() {
    if !is_child() {
        return;
    }
    with_deadline(PATIENCE, || {
        let rt = eddy_tests::rt(2);
        rt.block_on(async {
            let mut usr1 = signal(SignalKind::user_defined1()).unwrap();
            for _ in 0..3 {
                raise(libc::SIGUSR1);
                usr1.recv().await.unwrap();
            }
            assert!(
                poll_once(usr1.recv()).await.is_none(),
                "recv completed without a delivery"
            );
            // Deliveries that come while nobody awaits are remembered.
            raise(libc::SIGUSR1);
            raise(libc::SIGUSR1);
            usr1.recv().await.unwrap();
        });
    });
}

/// `ctrl_c()` completes on SIGINT once it has been polled (its first poll registers the
/// listener), and the SIGINT does not terminate the process.
#[test]
fn ctrl_c_completes_on_sigint() {
    assert_child_test_passes("child_ctrl_c_completes_on_sigint");
}

#[test]
#[ignore = "run in a child process by ctrl_c_completes_on_sigint"]
fn child_ctrl_c_completes_on_sigint() {
    if !is_child() {
        return;
    }
    with_deadline(PATIENCE, || {
        let rt = eddy_tests::rt(2);
        rt.block_on(async {
            let mut waiter = pin!(eddy::signal::ctrl_c());
            assert!(
                poll_once(waiter.as_mut()).await.is_none(),
                "ctrl_c completed before any SIGINT"
            );
            raise(libc::SIGINT);
            waiter.await.unwrap();
        });
    });
}

/// A handler from `add_signal_handler` runs on a worker for each delivery. Removing it
/// returns true once, then false, and leaves no eddy listener behind: the signal's default
/// action is back, so the next delivery terminates the child.
#[test]
fn handlers_run_on_a_worker_and_can_be_removed() {
    let (status, output) = run_child_test(
        "child_handlers_run_on_a_worker_and_can_be_removed",
        PATIENCE * 2,
    );
    assert!(
        output.contains("HANDLER REMOVED"),
        "the child failed before removing its handler ({status}):\n{output}"
    );
    assert_eq!(
        status.signal(),
        Some(libc::SIGUSR2),
        "after the removal SIGUSR2 did not terminate the child ({status}):\n{output}"
    );
}

#[test]
#[ignore = "run in a child process by handlers_run_on_a_worker_and_can_be_removed"]
fn child_handlers_run_on_a_worker_and_can_be_removed() {
    if !is_child() {
        return;
    }
    let rt = eddy_tests::rt(2);
    let (tx, rx) = mpsc::channel();
    rt.block_on(async move {
        add_signal_handler(SignalKind::user_defined2(), move || {
            let name = std::thread::current().name().map(String::from);
            let _ = tx.send(name);
        })
    })
    .unwrap();
    for _ in 0..3 {
        raise(libc::SIGUSR2);
        let name = rx
            .recv_timeout(PATIENCE)
            .expect("the handler was not called")
            .unwrap_or_default();
        assert!(name.starts_with("eddy-worker-"), "ran on {name:?}");
    }
    assert!(rt
        .block_on(async { remove_signal_handler(SignalKind::user_defined2()) })
        .unwrap());
    assert!(!rt
        .block_on(async { remove_signal_handler(SignalKind::user_defined2()) })
        .unwrap());
    println!("HANDLER REMOVED");
    raise(libc::SIGUSR2);
    println!("SIGUSR2 did not terminate the process");
}

/// Signals that cannot be caught are refused with `InvalidInput`.
#[eddy::test]
async fn uncatchable_signals_are_an_error() {
    let err = signal(SignalKind::from_raw(libc::SIGKILL)).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}
