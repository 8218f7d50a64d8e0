//! Criterion bench: `threadsafe` on eddy, tokio and smol (see `eddy_benches::workloads::threadsafe`).

mod common;

fn main() {
    common::main::<eddy_benches::workloads::threadsafe::Threadsafe>();
}
