//! Compile-time checks of the `Send`/`Sync` promises of the public types. A regression fails
//! the build of this test file.

use std::future::Future;
use std::time::Duration;

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>() {}
fn assert_send_val<T: Send>(_: &T) {}
fn assert_send_future<F: Future + Send>(f: F) -> F {
    f
}

/// Runtime, RuntimeHandle, Handle and TimerHandle are `Send + Sync`; `Task<u32>` is `Send`
/// (and `Sync`); the error and context types can cross threads.
#[test]
fn public_types_are_send_and_sync() {
    assert_send_sync::<eddy::Runtime>();
    assert_send_sync::<eddy::RuntimeHandle>();
    assert_send_sync::<eddy::Handle>();
    assert_send_sync::<eddy::TimerHandle>();
    assert_send::<eddy::Task<u32>>();
    assert_send_sync::<eddy::Task<u32>>();
    assert_send_sync::<eddy::TaskError>();
    assert_send_sync::<eddy::TaskPanic>();
    assert_send_sync::<eddy::ExceptionContext>();
    assert_send_sync::<eddy::Closed>();
    assert_send_sync::<eddy::time::Elapsed>();
    assert_send_sync::<eddy::Builder>();
}

/// The futures of `yield_now()`, `sleep()`, `sleep_until()` and `timeout()` are `Send`, so
/// they can be awaited in tasks given to `eddy::spawn`; so is a `Task` awaited inside one.
#[test]
fn futures_are_send() {
    let y = assert_send_future(eddy::yield_now());
    let s = assert_send_future(eddy::time::sleep(Duration::from_millis(1)));
    let u = assert_send_future(eddy::time::sleep_until(eddy::time()));
    let t = assert_send_future(eddy::time::timeout(Duration::from_millis(1), async { 1 }));
    assert_send_val(&y);
    assert_send_val(&s);
    // And they work in a spawned task.
    let rt = eddy::Builder::new().workers(1).build().unwrap();
    let v = rt.block_on(async move {
        eddy::spawn(async move {
            y.await;
            s.await;
            u.await;
            let inner = eddy::spawn(async { 2 });
            t.await.unwrap() + inner.await.unwrap()
        })
        .await
        .unwrap()
    });
    assert_eq!(v, 3);
}
