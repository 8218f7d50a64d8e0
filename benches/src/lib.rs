//! Side-by-side benchmarks of **eddy**, **tokio** (multi-thread runtime) and **smol**
//! (`async-executor` driven by worker threads running `async_io::block_on`).
//!
//! Every workload is written once, generically over the [`Runtime`] trait, in its own module
//! under [`workloads`]; [`runtimes`] holds the three adapters next to each other, so the only
//! runtime-specific code is the few lines that map "spawn", "call soon", "call later", ... to
//! each runtime's API. The criterion targets in `benches/benches/` run one workload each, on
//! all three runtimes in the same process, with 2 worker threads per runtime.
//!
//! The memory measurement (bytes per pending task) lives in its own bench target
//! (`benches/benches/memory.rs`) because it installs a counting global allocator
//! ([`counting`]) that would distort the timing benches.

pub mod call_sites;
pub mod counting;
pub mod runtimes;
pub mod server;
pub mod tcp;
pub mod util;
pub mod workloads;

pub use runtimes::{Eddy, Hung, JoinTask, Runtime, Smol, Tokio};
pub use tcp::Tcp;
pub use util::{block_on_timeout, Countdown, Lcg};
pub use workloads::Workload;

/// Worker threads per runtime in every benchmark.
pub const WORKERS: usize = 2;
