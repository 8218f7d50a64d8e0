//! A Redis-protocol (RESP2) key-value server on eddy, enough for `redis-cli` and
//! `redis-benchmark` (Debian package `redis-tools`).
//!
//! ```sh
//! cargo run --release --example kv_server -- --port 6380 --workers 2
//! redis-cli -p 6380 set greeting hello ex 60     # OK
//! redis-cli -p 6380 get greeting                 # "hello"
//! redis-benchmark -p 6380 -t set,get -P 16 -c 50 -q
//! ```
//!
//! Commands: `PING`, `ECHO`, `GET`, `SET` (`EX`, `PX`, `EXAT`, `PXAT`, `KEEPTTL`, `NX`, `XX`,
//! `GET`), `DEL`, `EXISTS`, `INCR`, `DECR`, `EXPIRE` and `PEXPIRE` (`NX`, `XX`, `GT`, `LT`),
//! `TTL`, `PTTL`, `MGET`, `MSET`, `DBSIZE`, `FLUSHDB`, `SELECT 0`, `QUIT`, and what tools ask
//! on connect: `COMMAND` (`COUNT`, `INFO`, `DOCS`), `CONFIG GET`, `CLIENT SETINFO`. Requests
//! may be pipelined, in RESP or inline. Replies, errors included, are Redis's: an unknown
//! command or a wrong argument count is an `-ERR` reply and the connection goes on;
//! malformed RESP gets `-ERR Protocol error: ...` and the connection is closed; a bulk string
//! longer than `--max-bulk-len` (default 512 MiB) is refused on its header, before anything
//! is allocated for it.
//!
//! Expiry is lazy plus a periodic sweep (see `store.rs` for why not a timer per key). Ctrl-C
//! shuts down gracefully: no new connections; open ones close after answering what they
//! have received; those still writing after 10 s are cut off.
//!
//! Modules: `resp` (the protocol), `store` (keys and commands) and `session` (one
//! connection's work) know nothing of eddy, and the benchmark runs them on tokio too;
//! `server` is the eddy side.

mod resp;
mod server;
mod session;
mod store;

use std::sync::Arc;

fn main() -> std::io::Result<()> {
    let mut port = 6379u16;
    let mut workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut options = server::Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next();
        let bad = |what: &str| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{flag} needs {what} (usage: --port P --workers N --max-bulk-len BYTES)"),
            )
        };
        match flag.as_str() {
            "--port" => {
                port = value
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| bad("a port"))?
            }
            "--workers" => {
                workers = value
                    .and_then(|v| v.parse().ok())
                    .filter(|&n: &usize| n > 0)
                    .ok_or_else(|| bad("a positive count"))?
            }
            "--max-bulk-len" => {
                options.max_bulk_len = value
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| bad("a byte count"))?
            }
            _ => return Err(bad("to be --port, --workers or --max-bulk-len")),
        }
    }

    let rt = eddy::Builder::new().workers(workers).build()?;
    rt.block_on(async move {
        let listener = eddy::net::TcpListener::bind(("127.0.0.1", port)).await?;
        println!("kv server listening on {}", listener.local_addr()?);
        let shutdown = async {
            if let Err(e) = eddy::signal::ctrl_c().await {
                eprintln!("no Ctrl-C handler ({e}): stop the server with a signal instead");
                std::future::pending::<()>().await;
            }
        };
        let store = Arc::new(store::Store::new());
        let served = server::serve(listener, store, options, shutdown).await?;
        println!(
            "served {} connections; {} cut off at shutdown",
            served.connections, served.cut_off
        );
        Ok(())
    })
}
