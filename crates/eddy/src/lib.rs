//! # eddy
//!
//! A multi-threaded, work-stealing task executor in which **every worker thread is an
//! asyncio-style event loop**.
//!
//! * Each worker runs asyncio's `_run_once` cycle (tidy timers, wait, move due timers, run
//!   what is ready) over its own ready queue, timer heap and poller; the `worker` module's
//!   notes describe the four phases.
//! * Idle workers steal batches of work from their siblings.
//! * Any thread, including threads the runtime never saw, can hand work in with
//!   [`RuntimeHandle::call_soon_threadsafe`] or [`RuntimeHandle::spawn`]: it goes through a
//!   global injector and wakes one parked worker through its eventfd.
//! * You get asyncio's callback API ([`call_soon`], [`call_later`], [`call_at`], cancellable
//!   [`Handle`] and [`TimerHandle`], an exception handler, debug mode with slow-callback
//!   reports) next to Rust futures ([`spawn`], [`spawn_local`], [`Task`],
//!   [`Runtime::block_on`]).
//! * A worker stuck in a long job strands nothing: a sibling (or a spare worker, when every
//!   worker is busy) serves its sockets, fires its timers and runs its queue, on another
//!   CPU than the job's.
//!
//! ```
//! use std::time::Duration;
//!
//! let rt = eddy::Builder::new().workers(2).build()?;
//! let total = rt.block_on(async {
//!     // A callback, asyncio style.
//!     let (tx, rx) = async_channel::bounded(1);
//!     eddy::call_later(Duration::from_millis(5), move || {
//!         tx.try_send("timer fired").unwrap();
//!     });
//!     assert_eq!(rx.recv().await.unwrap(), "timer fired");
//!
//!     // Futures, Rust style.
//!     let tasks: Vec<_> = (0..10u64).map(|i| eddy::spawn(async move { i * i })).collect();
//!     let mut total = 0;
//!     for t in tasks {
//!         total += t.await.unwrap();
//!     }
//!     total
//! });
//! assert_eq!(total, 285);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The design, with a picture of the threads, queues and wake paths, is in
//! `docs/architecture.md`.

#![warn(missing_docs)]

// The reactor uses epoll and eventfd directly (a parked worker's epoll is nested in a
// sibling's), and child processes are watched through pidfds: Linux only.
#[cfg(not(target_os = "linux"))]
compile_error!(
    "eddy supports Linux only: each worker's reactor uses epoll and eventfd directly, and \
     `polling`'s portable backends cannot nest one poller in another"
);

mod blocking;
mod builder;
mod callback;
mod clock;
mod context;
mod contextvar;
mod current;
mod exception;
mod handle;
mod hooks;
mod job;
mod metrics;
mod notify;
mod reactor;
mod run;
mod runtime;
mod sync;
pub mod task;
mod time_slice;
mod timer;
mod worker;

pub mod fs;
#[cfg(feature = "hyper")]
pub mod hyper;
pub mod io;
pub mod net;
pub mod process;
pub mod signal;
pub mod time;

pub use blocking::spawn_blocking;
pub use builder::Builder;
pub use callback::{Handle, TimerHandle};
pub use contextvar::{ContextVar, Token};
pub use current::{call_at, call_later, call_soon, spawn, spawn_local, time};
pub use eddy_macros::{main, test};
pub use exception::{default_exception_handler, ExceptionContext};
pub use handle::{Closed, RuntimeHandle};
pub use io::{add_reader, add_writer, remove_reader, remove_writer};
pub use metrics::{RuntimeMetrics, WorkerMetrics};
pub use run::{run, RunError, SHUTDOWN_TIMEOUT};
pub use runtime::Runtime;
pub use task::{
    yield_now, JoinSet, Task, TaskError, TaskFailure, TaskGroup, TaskGroupError, TaskId, TaskPanic,
    YieldNow,
};
