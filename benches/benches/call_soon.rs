//! Criterion bench: `call_soon` on eddy, tokio and smol (see `eddy_benches::workloads::call_soon`).

mod common;

fn main() {
    common::main::<eddy_benches::workloads::call_soon::CallSoon>();
}
