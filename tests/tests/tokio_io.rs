//! With the `tokio-io` feature, eddy's sockets implement tokio's `AsyncRead`/`AsyncWrite`, so
//! code written against tokio's traits runs on eddy.

use eddy_tests::{with_deadline, PATIENCE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn tokio_style_echo<S>(mut s: S) -> std::io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).await?;
    s.write_all(&buf[..n]).await?;
    s.shutdown().await
}

/// An echo written against tokio's traits round-trips over an eddy TCP connection, EOF and
/// `shutdown` included.
#[test]
fn tokio_traits_on_eddy_sockets() {
    with_deadline(PATIENCE, || {
        eddy_tests::rt(2).block_on(async {
            let listener = eddy::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = eddy::spawn(async move {
                let (s, _) = listener.accept().await.unwrap();
                tokio_style_echo(s).await.unwrap();
            });
            let mut c = eddy::net::TcpStream::connect(addr).await.unwrap();
            c.write_all(b"via tokio traits").await.unwrap();
            let mut back = Vec::new();
            c.read_to_end(&mut back).await.unwrap();
            assert_eq!(back, b"via tokio traits");
            server.await.unwrap();
        })
    });
}
