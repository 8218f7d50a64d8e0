//! Wake latency from a foreign thread to a parked runtime, on eddy, tokio and smol in one
//! process (see `eddy_benches::workloads::wake_latency`). Not a criterion bench: it prints
//! percentiles of an HDR histogram.
//!
//! `WAKE_SAMPLES` (default 2000) and `WAKE_GAP_US` (default 2000) override the defaults.

use std::time::Duration;

use eddy_benches::workloads::wake_latency;
use eddy_benches::{Eddy, Runtime, Smol, Tokio, WORKERS};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run<R: Runtime>(samples: usize, gap: Duration) {
    let rt = R::build(WORKERS);
    match wake_latency::measure(&rt, samples / 20, samples, gap) {
        Ok(h) => {
            let us = |ns: u64| ns as f64 / 1000.0;
            println!(
                "wake_latency/{:<6} samples {:>5}  p50 {:>8.1} us  p90 {:>8.1} us  p99 {:>8.1} us  p99.9 {:>8.1} us  max {:>8.1} us  mean {:>8.1} us",
                R::NAME,
                h.len(),
                us(h.value_at_quantile(0.50)),
                us(h.value_at_quantile(0.90)),
                us(h.value_at_quantile(0.99)),
                us(h.value_at_quantile(0.999)),
                us(h.max()),
                h.mean() / 1000.0,
            );
        }
        Err(hung) => {
            println!("wake_latency/{:<6} SKIPPED: {hung}", R::NAME);
            std::mem::forget(rt);
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench` (and maybe a filter): there is nothing to configure.
    let samples = env_or("WAKE_SAMPLES", 2000) as usize;
    let gap = Duration::from_micros(env_or("WAKE_GAP_US", 2000));
    println!(
        "wake latency: {samples} samples per runtime, {} us idle gap, {WORKERS} workers",
        gap.as_micros()
    );
    run::<Eddy>(samples, gap);
    run::<Tokio>(samples, gap);
    run::<Smol>(samples, gap);
}
