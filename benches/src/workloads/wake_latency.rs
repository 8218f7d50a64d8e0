//! `wake_latency`: how long a closure submitted from a foreign thread takes to start running
//! on a runtime whose workers are all parked (idle).
//!
//! The benchmark thread sleeps `gap` (so every worker parks), records `Instant::now()`,
//! submits a closure (eddy `call_soon_threadsafe`; tokio and smol spawn a task around it) that
//! measures the elapsed time, and waits for the result before the next sample. The samples
//! go into an HDR histogram (nanoseconds).

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::runtimes::{Hung, Runtime, HANG_TIMEOUT};

/// Measures `samples` wake-ups (after `warmup` unrecorded ones), sleeping `gap` before each.
pub fn measure<R: Runtime>(
    rt: &R,
    warmup: usize,
    samples: usize,
    gap: Duration,
) -> Result<Histogram<u64>, Hung> {
    let h = rt.handle();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram");
    let (tx, rx) = std::sync::mpsc::sync_channel::<Duration>(1);
    for i in 0..warmup + samples {
        std::thread::sleep(gap);
        let tx = tx.clone();
        let start = Instant::now();
        R::call_soon_threadsafe(&h, move || {
            let _ = tx.send(start.elapsed());
        });
        let took = rx
            .recv_timeout(HANG_TIMEOUT)
            .map_err(|_| Hung { runtime: R::NAME })?;
        if i >= warmup {
            hist.saturating_record(took.as_nanos().max(1) as u64);
        }
    }
    Ok(hist)
}
