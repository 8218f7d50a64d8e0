//! Criterion bench: `chained_spawn` on eddy, tokio and smol (see `eddy_benches::workloads::chained_spawn`).

mod common;

fn main() {
    common::main::<eddy_benches::workloads::chained_spawn::ChainedSpawn>();
}
