//! A TCP echo server: one task per connection.
//!
//! ```sh
//! cargo run --release --example echo_server          # listens on 127.0.0.1:7000
//! cargo run --release --example echo_server -- 7001  # or on the given port
//! ```

use eddy::net::{TcpListener, TcpStream};

fn main() -> std::io::Result<()> {
    let port: u16 = match std::env::args().nth(1) {
        Some(p) => p.parse().map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("bad port {p:?}: {e}"),
            )
        })?,
        None => 7000,
    };
    let workers = std::env::var("EDDY_WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(num_workers);
    let rt = eddy::Builder::new().workers(workers).build()?;
    rt.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        println!("echo server listening on {}", listener.local_addr()?);
        loop {
            let (stream, _) = listener.accept().await?;
            drop(eddy::spawn(echo(stream)));
        }
    })
}

async fn echo(stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if stream.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

fn num_workers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}
