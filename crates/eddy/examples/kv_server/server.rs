//! The eddy side: the accept loop, one task per connection, the periodic sweep, and
//! graceful shutdown.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use eddy::net::{TcpListener, TcpStream};

use super::resp::DEFAULT_MAX_BULK_LEN;
use super::session::{Flow, Session};
use super::store::{Store, SWEEP_EVERY};

/// A pause after an accept error other than a peer giving up (out of descriptors): trying
/// again at once would only fail again at full speed.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(10);

/// A reply buffer larger than this is given back after its write (after one large value).
const KEEP_OUT_AT_MOST: usize = 1 << 20;

/// How the server runs.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// The longest bulk string a request may carry (Redis's `proto-max-bulk-len`).
    pub(crate) max_bulk_len: usize,
    /// How often expired keys that nobody reads are removed; `None`: never (they are still
    /// invisible to every command, and removed when one touches them).
    pub(crate) sweep_every: Option<Duration>,
    /// How long shutdown waits for connections to finish what they are doing.
    pub(crate) grace: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_bulk_len: DEFAULT_MAX_BULK_LEN,
            sweep_every: Some(SWEEP_EVERY),
            grace: Duration::from_secs(10),
        }
    }
}

/// What a [`serve`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Served {
    /// Connections accepted.
    pub(crate) connections: u64,
    /// Connections still open when the grace ran out, closed in the middle of a write.
    pub(crate) cut_off: usize,
}

/// Serves `store` on every connection `listener` accepts until `shutdown` completes, then
/// shuts down gracefully: no new connections; each open one closes once it has written the
/// replies to what it has received; after `options.grace` the ones still writing are cut
/// off.
///
/// Errors of one connection (a reset, a malformed request) end only that connection, and an
/// accept error does not end the loop.
///
/// # Errors
///
/// None today; the `io::Result` leaves room for setup errors.
pub(crate) async fn serve(
    listener: TcpListener,
    store: Arc<Store>,
    options: Options,
    shutdown: impl Future<Output = ()>,
) -> io::Result<Served> {
    let sweeper = options.sweep_every.map(|period| {
        let store = store.clone();
        eddy::spawn(async move {
            let mut every = eddy::time::interval(period);
            every.set_missed_tick_behavior(eddy::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                store.sweep(Instant::now());
            }
        })
    });
    // Closing a channel wakes every receiver, which makes it a broadcast of one event:
    // `finish` tells connections to stop reading, `abort` to stop writing.
    let (finish, finishing) = async_channel::bounded::<()>(1);
    let (abort, aborting) = async_channel::bounded::<()>(1);
    // Each connection holds a clone of `open`; `all_closed` yields once the last is gone.
    let (open, all_closed) = async_channel::bounded::<()>(1);
    let mut connections = 0;
    let mut shutdown = pin!(shutdown);
    loop {
        let stream = match until(listener.accept(), shutdown.as_mut()).await {
            None => break,
            Some(Ok((stream, _))) => stream,
            Some(Err(e)) if is_peer_gone(&e) => continue,
            Some(Err(e)) => {
                eprintln!("kv_server: accept failed: {e}");
                eddy::time::sleep(ACCEPT_ERROR_PAUSE).await;
                continue;
            }
        };
        connections += 1;
        let connection = connection(
            stream,
            Session::new(store.clone(), options.max_bulk_len),
            finishing.clone(),
            aborting.clone(),
            open.clone(),
        );
        drop(eddy::spawn(connection));
    }
    // New connections are refused from here on.
    drop(listener);
    drop((finish, open));
    let cut_off = match eddy::time::timeout(options.grace, all_closed.recv()).await {
        Ok(_) => 0,
        Err(_) => {
            let left = all_closed.sender_count();
            drop(abort);
            let _ = all_closed.recv().await;
            left
        }
    };
    if let Some(sweeper) = sweeper {
        sweeper.cancel();
    }
    Ok(Served {
        connections,
        cut_off,
    })
}

/// Serves one connection: read, run every complete request, write their replies in one
/// write, until the peer closes, a protocol error or `QUIT` ends it, or shutdown: `finish`
/// closes (stop at the next read) or `abort` closes (stop even in a write).
async fn connection(
    stream: TcpStream,
    mut session: Session,
    finish: async_channel::Receiver<()>,
    abort: async_channel::Receiver<()>,
    _open: async_channel::Sender<()>,
) {
    // Replies are written whole; Nagle's algorithm would only hold back the last part.
    let _ = stream.set_nodelay(true);
    // Pinned once for the connection's life: each one registers with its channel once, not
    // at every read.
    let mut finishing = pin!(finish.recv());
    let mut aborting = pin!(abort.recv());
    let mut out = Vec::new();
    loop {
        let flow = session.process(&mut out);
        if !out.is_empty() {
            match until(stream.write_all(&out), aborting.as_mut()).await {
                Some(Ok(())) => {}
                Some(Err(_)) | None => return,
            }
            out.clear();
            if out.capacity() > KEEP_OUT_AT_MOST {
                out = Vec::new();
            }
        }
        match flow {
            Flow::Read => {}
            Flow::Flush => continue,
            Flow::Close => return,
        }
        match until(stream.read(session.read_buf()), finishing.as_mut()).await {
            Some(Ok(0) | Err(_)) | None => return,
            Some(Ok(n)) => session.filled(n),
        }
    }
}

/// Runs `work` unless `stop` completes first: `None` then (and `work` is dropped). `stop` is
/// looked at first, so that a steady stream of work cannot hold off a shutdown.
async fn until<F: Future, S: Future>(work: F, mut stop: Pin<&mut S>) -> Option<F::Output> {
    let mut work = pin!(work);
    poll_fn(|cx| {
        if stop.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        work.as_mut().poll(cx).map(Some)
    })
    .await
}

/// Accept errors that concern one peer only (it gave up before it was taken).
fn is_peer_gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}
