//! The atomics that the lock-free protocols use, swapped for loom's when the crate is built
//! for the loom models (`RUSTFLAGS="--cfg eddy_loom"`, see `.ci/run`), so that the models
//! check the same source the runtime runs.

pub(crate) mod atomic {
    #[cfg(eddy_loom)]
    pub(crate) use loom::sync::atomic::{fence, AtomicU8, AtomicUsize, Ordering};
    #[cfg(not(eddy_loom))]
    pub(crate) use std::sync::atomic::{fence, AtomicU8, AtomicUsize, Ordering};
}
