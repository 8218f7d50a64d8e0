//! Addresses that may need name resolution, and resolving them on the blocking pool.

use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs as StdToSocketAddrs};

/// Anything eddy's networking functions accept as an address: a `SocketAddr`, an
/// `(IpAddr, u16)`, or a host name string (`"localhost:8080"`, `("example.org", 80)`).
///
/// Literal addresses are used as they are; host names are resolved with the system resolver
/// on the blocking pool, so a slow DNS server never stalls a worker.
///
/// This trait is sealed: it is implemented for the types above only.
pub trait ToSocketAddrs: sealed::Sealed {}

mod sealed {
    use super::*;

    /// Either resolved already, or a name for the blocking pool.
    #[derive(Debug)]
    pub enum Target {
        Resolved(Vec<SocketAddr>),
        Lookup(String),
    }

    pub trait Sealed {
        fn into_target(self) -> Target;
    }

    impl Sealed for SocketAddr {
        fn into_target(self) -> Target {
            Target::Resolved(vec![self])
        }
    }
    impl Sealed for (IpAddr, u16) {
        fn into_target(self) -> Target {
            Target::Resolved(vec![SocketAddr::from(self)])
        }
    }
    impl Sealed for &str {
        fn into_target(self) -> Target {
            self.to_string().into_target()
        }
    }
    impl Sealed for String {
        fn into_target(self) -> Target {
            match self.parse::<SocketAddr>() {
                Ok(a) => Target::Resolved(vec![a]),
                Err(_) => Target::Lookup(self),
            }
        }
    }
    impl Sealed for (&str, u16) {
        fn into_target(self) -> Target {
            (self.0.to_string(), self.1).into_target()
        }
    }
    impl Sealed for (String, u16) {
        fn into_target(self) -> Target {
            match self.0.parse::<IpAddr>() {
                Ok(ip) => Target::Resolved(vec![SocketAddr::new(ip, self.1)]),
                Err(_) => Target::Lookup(format!("{}:{}", self.0, self.1)),
            }
        }
    }
    impl Sealed for Vec<SocketAddr> {
        fn into_target(self) -> Target {
            Target::Resolved(self)
        }
    }
}

impl ToSocketAddrs for SocketAddr {}
impl ToSocketAddrs for (IpAddr, u16) {}
impl ToSocketAddrs for &str {}
impl ToSocketAddrs for String {}
impl ToSocketAddrs for (&str, u16) {}
impl ToSocketAddrs for (String, u16) {}
impl ToSocketAddrs for Vec<SocketAddr> {}

/// Resolves `host` to socket addresses with the system resolver (`getaddrinfo`, which reads
/// `/etc/hosts` and asks DNS), **on the blocking pool**: a slow or unreachable DNS server
/// stalls a pool thread, never a worker. Literal addresses (`"10.0.0.1:80"`,
/// `"[::1]:443"`, a `SocketAddr`) are returned as they are, without the trip to the pool.
/// The counterpart of tokio's `lookup_host`; [`TcpStream::connect`](crate::net::TcpStream::connect)
/// and the other functions taking a [`ToSocketAddrs`] resolve the same way.
///
/// A host name needs a port: `"example.org:80"` or `("example.org", 80)`.
///
/// # Errors
///
/// `InvalidInput` for a string without a port, or the resolver's error (for a name that
/// does not exist, for example), its message naming what was looked up. An error, too, if
/// the runtime shuts down during the lookup.
///
/// # Examples
///
/// ```
/// let rt = eddy::Runtime::new()?;
/// rt.block_on(async {
///     let addrs: Vec<_> = eddy::net::lookup_host("localhost:8080").await?.collect();
///     assert!(addrs.iter().all(|a| a.ip().is_loopback() && a.port() == 8080));
///     let err = eddy::net::lookup_host("localhost").await.err().unwrap();
///     assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput); // no port
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn lookup_host(host: impl ToSocketAddrs) -> io::Result<impl Iterator<Item = SocketAddr>> {
    Ok(lookup(host).await?.into_iter())
}

/// Resolves `addr`, on the blocking pool if it is a host name.
async fn lookup(addr: impl ToSocketAddrs) -> io::Result<Vec<SocketAddr>> {
    match sealed::Sealed::into_target(addr) {
        sealed::Target::Resolved(a) => Ok(a),
        sealed::Target::Lookup(name) => {
            // Without a port the resolver would only say "invalid socket address".
            if !name.contains(':') {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("invalid address {name:?}: expected host:port"),
                ));
            }
            crate::spawn_blocking(move || {
                name.to_socket_addrs()
                    .map(|i| i.collect::<Vec<_>>())
                    .map_err(|e| {
                        io::Error::new(e.kind(), format!("could not resolve {name:?}: {e}"))
                    })
            })
            .await
            .map_err(io::Error::other)?
        }
    }
}

/// Resolves `addr` (see [`lookup`]) to at least one address.
pub(crate) async fn resolve(addr: impl ToSocketAddrs) -> io::Result<Vec<SocketAddr>> {
    let addrs = lookup(addr).await?;
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the address resolved to nothing",
        ));
    }
    Ok(addrs)
}

/// Tries `op` on each address in turn; returns the first success or the last error.
pub(crate) async fn each_addr<T, F, Fut>(addr: impl ToSocketAddrs, mut op: F) -> io::Result<T>
where
    F: FnMut(SocketAddr) -> Fut,
    Fut: std::future::Future<Output = io::Result<T>>,
{
    let mut last = None;
    for a in resolve(addr).await? {
        match op(a).await {
            Ok(v) => return Ok(v),
            Err(e) => last = Some(e),
        }
    }
    Err(last.expect("resolve returns at least one address"))
}
