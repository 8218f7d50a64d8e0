//! Criterion bench: `timers` on eddy, tokio and smol (see `eddy_benches::workloads::timers`).

mod common;

fn main() {
    common::main::<eddy_benches::workloads::timers::Timers>();
}
