//! Criterion bench: `spawn_many_remote` on eddy, tokio and smol (see `eddy_benches::workloads::spawn_many_remote`).

mod common;

fn main() {
    common::main::<eddy_benches::workloads::spawn_many_remote::SpawnManyRemote>();
}
