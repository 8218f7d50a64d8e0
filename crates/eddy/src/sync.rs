//! The atomics that the lock-free protocols use, swapped for loom's when the crate is built
//! for the loom models (`RUSTFLAGS="--cfg eddy_loom"`, see `.ci/run`), so that the models
//! check the same source the runtime runs.

#[cfg(not(eddy_loom))]
pub(crate) use parking_lot::Mutex;

/// `parking_lot::Mutex`'s interface over loom's mutex.
#[cfg(eddy_loom)]
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

#[cfg(eddy_loom)]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex(loom::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        self.0.lock().unwrap()
    }
}

#[cfg(eddy_loom)]
impl<T> std::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mutex")
    }
}

pub(crate) mod atomic {
    #[cfg(eddy_loom)]
    pub(crate) use loom::sync::atomic::{fence, AtomicPtr, AtomicU8, AtomicUsize, Ordering};
    #[cfg(not(eddy_loom))]
    pub(crate) use std::sync::atomic::{fence, AtomicPtr, AtomicU8, AtomicUsize, Ordering};
}

/// Runs a loom model and prints how many interleavings it explored (for the CI log).
#[cfg(all(test, eddy_loom))]
pub(crate) fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    loom::model(move || {
        counted.fetch_add(1, Ordering::Relaxed);
        f()
    });
    eprintln!(
        "loom model {name}: {} interleavings explored",
        runs.load(Ordering::Relaxed)
    );
}
