//! Criterion bench: `ping_pong` on eddy, tokio and smol (see `eddy_benches::workloads::ping_pong`).

mod common;

fn main() {
    common::main::<eddy_benches::workloads::ping_pong::PingPong>();
}
