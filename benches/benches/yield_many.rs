//! Criterion bench: `yield_many` on eddy, tokio and smol (see `eddy_benches::workloads::yield_many`).

mod common;

fn main() {
    common::main::<eddy_benches::workloads::yield_many::YieldMany>();
}
