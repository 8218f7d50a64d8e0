//! The price of an idle runtime: CPU time a runtime with nothing to do uses, on eddy, tokio
//! and smol, each measured in its own child process (the process's whole utime + stime, read
//! from `/proc/PID/stat`, over `--secs` seconds after a 1 s settle).
//!
//! ```sh
//! cargo run --release -p eddy-benches --bin idle -- --secs 10
//! ```

use std::io;
use std::time::Duration;

use eddy_benches::server::{announce, clock_ticks_per_sec, cpu_ticks, exit_with_parent, Server};

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    if let Some(name) = value("--serve") {
        return idle(&name);
    }
    let secs: u64 = value("--secs").and_then(|s| s.parse().ok()).unwrap_or(10);
    println!("| runtime | CPU over {secs} s idle | % of one core |\n|---|---:|---:|");
    for name in ["eddy", "tokio", "smol"] {
        let server = Server::start(&["--serve", name])?;
        std::thread::sleep(Duration::from_secs(1));
        let before = cpu_ticks(server.pid())?;
        std::thread::sleep(Duration::from_secs(secs));
        let ticks = cpu_ticks(server.pid())? - before;
        server.stop();
        let cpu = ticks as f64 / clock_ticks_per_sec() as f64;
        println!(
            "| {name} | {:.0} ms | {:.3} |",
            cpu * 1e3,
            cpu / secs as f64 * 100.0
        );
    }
    Ok(())
}

/// A runtime with 2 workers and nothing to do, until the parent kills us. The address is a
/// placeholder: `Server::start` waits for the announcement.
fn idle(name: &str) -> io::Result<()> {
    exit_with_parent();
    let placeholder = "127.0.0.1:1".parse().expect("address");
    match name {
        "eddy" => {
            let _rt = eddy::Builder::new().workers(2).build()?;
            announce(placeholder);
            loop {
                std::thread::park();
            }
        }
        "tokio" => {
            let _rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            announce(placeholder);
            loop {
                std::thread::park();
            }
        }
        "smol" => {
            let _ex = eddy_benches::server::smol_executor(2);
            announce(placeholder);
            loop {
                std::thread::park();
            }
        }
        other => Err(io::Error::other(format!("unknown runtime {other}"))),
    }
}
