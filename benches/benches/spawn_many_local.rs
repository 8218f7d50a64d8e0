//! Criterion bench: `spawn_many_local` on eddy, tokio and smol (see `eddy_benches::workloads::spawn_many_local`).

mod common;

fn main() {
    common::main::<eddy_benches::workloads::spawn_many_local::SpawnManyLocal>();
}
