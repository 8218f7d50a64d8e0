//! A snapshot of what the runtime's queues and heaps hold, read without stopping anyone.
//!
//! Every figure is read from atomics or taken under the same short locks the workers use, so
//! a snapshot costs the workers nothing measurable; figures of different workers are not
//! taken at the same instant.

use crate::shared::Shared;

/// What one worker's queues and timer heap hold.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerMetrics {
    /// Jobs in the worker's stealable ready queue.
    pub ready_queue_depth: usize,
    /// Entries in the worker's timer heap, cancelled ones included.
    pub timer_heap_size: usize,
    /// Cancelled entries still in the heap (asyncio's `_timer_cancelled_count`).
    pub timers_cancelled_in_heap: usize,
    /// Times the heap was rebuilt by the tidy rule (more than 100 entries, more than half
    /// of them cancelled).
    pub timer_heap_rebuilds: usize,
}

/// A snapshot of a runtime; see [`Runtime::metrics`](crate::Runtime::metrics).
///
/// # Examples
///
/// ```
/// let rt = eddy::Builder::new().workers(2).build()?;
/// let m = rt.metrics();
/// assert_eq!(m.workers.len(), 2);
/// assert_eq!(m.injector_depth, 0);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuntimeMetrics {
    /// One entry per worker, by index.
    pub workers: Vec<WorkerMetrics>,
    /// Jobs waiting in the global injector.
    pub injector_depth: usize,
    /// Tasks that have gone pending at least once and have not finished.
    pub idle_capable_tasks: usize,
    /// Threads alive in the blocking pool.
    pub blocking_threads: usize,
}

pub(crate) fn snapshot(shared: &Shared) -> RuntimeMetrics {
    RuntimeMetrics {
        workers: shared
            .workers
            .iter()
            .map(|w| WorkerMetrics {
                ready_queue_depth: w.stealer.len(),
                timer_heap_size: w.timers.len(),
                timers_cancelled_in_heap: w.timers.cancelled_count(),
                timer_heap_rebuilds: w.timers.rebuilds(),
            })
            .collect(),
        injector_depth: shared.injector.len(),
        idle_capable_tasks: shared.registry.len(),
        blocking_threads: shared.blocking.threads(),
    }
}
