//! One connection's protocol work: parse what has arrived, run every complete request,
//! collect the replies.
//!
//! Runtime-neutral, so that the eddy server and the tokio one of the benchmark do exactly
//! the same work per request and differ only in how they read and write.

use std::sync::Arc;
use std::time::Instant;

use super::resp::{Parser, Reply};
use super::store::Store;

/// Replies are handed to the socket once this much has built up, even if more requests are
/// waiting: a client that pipelines many large `GET`s without reading the answers is then
/// held back by TCP instead of growing the server's buffer.
const FLUSH_AT: usize = 64 * 1024;

/// What the connection should do after [`Session::process`], once it has written the
/// replies collected so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Every complete request was run: read more.
    Read,
    /// Replies reached [`FLUSH_AT`]: call `process` again before reading.
    Flush,
    /// Close the connection: after `QUIT`, or after a protocol error (whose reply is the
    /// last one collected).
    Close,
}

/// The state of one connection: its input buffer and parser, and the store it works on.
#[derive(Debug)]
pub(crate) struct Session {
    parser: Parser,
    store: Arc<Store>,
}

impl Session {
    /// A session on `store` that refuses bulk strings longer than `max_bulk_len` bytes.
    pub(crate) fn new(store: Arc<Store>, max_bulk_len: usize) -> Self {
        Session {
            parser: Parser::new(max_bulk_len),
            store,
        }
    }

    /// Room to read into; report the bytes read with [`filled`](Self::filled).
    pub(crate) fn read_buf(&mut self) -> &mut [u8] {
        self.parser.read_buf()
    }

    /// Records that `n` bytes were read into [`read_buf`](Self::read_buf).
    pub(crate) fn filled(&mut self, n: usize) {
        self.parser.filled(n);
    }

    /// Runs the complete requests received so far, in order, appending each reply to `out`
    /// (pipelining: all the requests of one read are answered in one write).
    pub(crate) fn process(&mut self, out: &mut Vec<u8>) -> Flow {
        // One clock reading per batch, as Redis reads its clock once per event-loop turn.
        let now = Instant::now();
        while out.len() < FLUSH_AT {
            match self.parser.next_command() {
                Ok(Some(command)) if command[0].eq_ignore_ascii_case(b"quit") => {
                    Reply::OK.encode(out);
                    return Flow::Close;
                }
                Ok(Some(command)) => self.store.execute(command, now).encode(out),
                Ok(None) => return Flow::Read,
                Err(e) => {
                    Reply::err(e).encode(out);
                    return Flow::Close;
                }
            }
        }
        Flow::Flush
    }
}
