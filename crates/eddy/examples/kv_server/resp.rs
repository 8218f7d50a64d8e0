//! RESP2, the Redis wire protocol: an incremental request parser and reply encoding.
//!
//! Runtime-neutral: the [`Parser`] owns the connection's input buffer and hands out the spare
//! part of it to read into ([`Parser::read_buf`], [`Parser::filled`]), whichever runtime does
//! the reading. It accepts what Redis accepts: multibulk requests (`*N` then `N` times `$len`
//! and the bytes) and inline commands (a line of words, with Redis's quoting rules).
//!
//! Limits are checked on the header, before anything is reserved for what it announces: a
//! bulk length over the cap ([`Parser::new`]'s `max_bulk_len`) is a protocol error as soon as
//! its `$len` line is in. Even under the cap nothing is reserved ahead: the buffer grows with
//! the bytes that actually arrive, so a client that announces a large value and sends nothing
//! costs the server nothing.
//!
//! Malformed input gets Redis's error texts. Where Redis is lenient, this parser is not: a
//! `*N` or `$len` line must end in CRLF, and so must a bulk string's data (Redis skips the
//! two bytes after the data unseen, so a length that does not match its data turns the rest
//! into a request of its own); either is a protocol error here.

use std::fmt;
use std::io::Write as _;

/// Redis's default `proto-max-bulk-len`: the longest bulk string a request may carry.
pub(crate) const DEFAULT_MAX_BULK_LEN: usize = 512 * 1024 * 1024;

/// The longest inline command, and the longest `*N` or `$len` line (Redis's
/// `PROTO_INLINE_MAX_SIZE`): past this without a line end the request is refused.
const INLINE_MAX: usize = 64 * 1024;

/// Spare room offered to each read.
const READ_CHUNK: usize = 16 * 1024;

/// An input buffer larger than this is given back once it is empty (after one large value).
const KEEP_AT_MOST: usize = 4 * READ_CHUNK;

/// Argument slots reserved ahead for a multibulk request, however many it announces.
const PREALLOC_ARGS: usize = 1024;

/// One request: the command name and its arguments, as bytes.
pub(crate) type Command = Vec<Vec<u8>>;

/// Malformed input. The connection cannot be resynchronised after it: the server answers
/// `-ERR Protocol error: ...` and closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProtocolError(String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Protocol error: {}", self.0)
    }
}

impl ProtocolError {
    fn new(what: impl Into<String>) -> Self {
        ProtocolError(what.into())
    }
}

/// A multibulk request whose arguments are still arriving.
#[derive(Debug)]
struct Partial {
    /// Arguments not yet complete.
    remaining: usize,
    args: Command,
    /// The length of the bulk being read, once its `$len` line is in.
    bulk: Option<usize>,
}

/// An incremental RESP2 and inline request parser over the connection's input buffer.
#[derive(Debug)]
pub(crate) struct Parser {
    /// Bytes `start..end` are received and not yet parsed; `end..` is room to read into.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max_bulk_len: usize,
    /// Kept between calls, so that a request arriving over many reads is parsed once.
    partial: Option<Partial>,
}

impl Parser {
    /// A parser that refuses bulk strings longer than `max_bulk_len` bytes.
    pub(crate) fn new(max_bulk_len: usize) -> Self {
        Parser {
            buf: Vec::new(),
            start: 0,
            end: 0,
            max_bulk_len,
            partial: None,
        }
    }

    /// Room to read the next bytes into; report how many arrived with [`filled`](Self::filled).
    pub(crate) fn read_buf(&mut self) -> &mut [u8] {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if self.buf.len() > KEEP_AT_MOST {
                self.buf = Vec::new();
            }
        }
        if self.buf.len() - self.end < READ_CHUNK {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() - self.end < READ_CHUNK {
                // Doubling: the buffer never holds more than twice what was received.
                let len = (self.buf.len() * 2).max(self.end + READ_CHUNK);
                self.buf.resize(len, 0);
            }
        }
        &mut self.buf[self.end..]
    }

    /// Records that `n` bytes were read into the start of the last [`read_buf`](Self::read_buf).
    pub(crate) fn filled(&mut self, n: usize) {
        assert!(
            self.end + n <= self.buf.len(),
            "filled past the read buffer"
        );
        self.end += n;
    }

    /// The next complete request, `None` if more bytes are needed first.
    ///
    /// # Errors
    ///
    /// Malformed input: the caller should answer the error and close the connection.
    pub(crate) fn next_command(&mut self) -> Result<Option<Command>, ProtocolError> {
        loop {
            if self.partial.is_none() {
                if self.start == self.end {
                    return Ok(None);
                }
                if self.buf[self.start] != b'*' {
                    match self.inline()? {
                        None => return Ok(None),
                        // Redis skips empty lines.
                        Some(args) if args.is_empty() => continue,
                        Some(args) => return Ok(Some(args)),
                    }
                }
                let Some((count, next)) = self.header_line("too big mbulk count string")? else {
                    return Ok(None);
                };
                let count = count
                    .filter(|&n| n <= i64::from(i32::MAX))
                    .ok_or_else(|| ProtocolError::new("invalid multibulk length"))?;
                self.start = next;
                // `*0` and `*-1` are no request at all.
                if count <= 0 {
                    continue;
                }
                let count = count as usize;
                self.partial = Some(Partial {
                    remaining: count,
                    args: Vec::with_capacity(count.min(PREALLOC_ARGS)),
                    bulk: None,
                });
            }
            return self.bulks();
        }
    }

    /// Reads the arguments of the multibulk request in progress.
    fn bulks(&mut self) -> Result<Option<Command>, ProtocolError> {
        loop {
            let partial = self.partial.as_ref().expect("a request in progress");
            if partial.remaining == 0 {
                return Ok(self.partial.take().map(|p| p.args));
            }
            let len = match partial.bulk {
                Some(len) => len,
                None => {
                    if self.start == self.end {
                        return Ok(None);
                    }
                    let first = self.buf[self.start];
                    if first != b'$' {
                        return Err(ProtocolError::new(format!(
                            "expected '$', got '{}'",
                            char::from(first)
                        )));
                    }
                    let Some((len, next)) = self.header_line("too big bulk count string")? else {
                        return Ok(None);
                    };
                    // The cap is checked here, on the header: nothing is reserved for it.
                    let len = len
                        .and_then(|n| usize::try_from(n).ok())
                        .filter(|&n| n <= self.max_bulk_len)
                        .ok_or_else(|| ProtocolError::new("invalid bulk length"))?;
                    self.start = next;
                    self.partial.as_mut().expect("in progress").bulk = Some(len);
                    len
                }
            };
            if self.end - self.start < len + 2 {
                return Ok(None);
            }
            let data = &self.buf[self.start..self.start + len + 2];
            if &data[len..] != b"\r\n" {
                // Redis skips these two bytes unseen; a length that does not match its data
                // would then be read as the next request, so they are checked here.
                return Err(ProtocolError::new("bulk data not followed by CRLF"));
            }
            let arg = data[..len].to_vec();
            self.start += len + 2;
            let partial = self.partial.as_mut().expect("in progress");
            partial.args.push(arg);
            partial.remaining -= 1;
            partial.bulk = None;
        }
    }

    /// Parses the `*N` or `$len` line at `start`: the number (`None` if it is not one) and
    /// where the next line begins; `Ok(None)` if the line is not complete yet.
    fn header_line(
        &self,
        too_big: &'static str,
    ) -> Result<Option<(Option<i64>, usize)>, ProtocolError> {
        let pending = &self.buf[self.start..self.end];
        let Some(cr) = pending.iter().position(|&b| b == b'\r') else {
            if pending.len() > INLINE_MAX {
                return Err(ProtocolError::new(too_big));
            }
            return Ok(None);
        };
        let Some(&after) = pending.get(cr + 1) else {
            return Ok(None);
        };
        // A line ends with CRLF; a lone CR makes the number invalid.
        let number = if after == b'\n' {
            parse_i64(&pending[1..cr])
        } else {
            None
        };
        Ok(Some((number, self.start + cr + 2)))
    }

    /// Parses an inline command line at `start`; `Ok(None)` if its line end has not arrived.
    fn inline(&mut self) -> Result<Option<Command>, ProtocolError> {
        let pending = &self.buf[self.start..self.end];
        let Some(nl) = pending.iter().position(|&b| b == b'\n') else {
            if pending.len() > INLINE_MAX {
                return Err(ProtocolError::new("too big inline request"));
            }
            return Ok(None);
        };
        let line = pending[..nl].strip_suffix(b"\r").unwrap_or(&pending[..nl]);
        let args =
            split_inline(line).ok_or_else(|| ProtocolError::new("unbalanced quotes in request"))?;
        self.start += nl + 1;
        Ok(Some(args))
    }
}

/// Splits an inline command into words as Redis does: blanks separate words; a quote opens
/// a "double quoted" part (with `\n`, `\r`, `\t`, `\b`, `\a`, `\xHH` and `\<char>` escapes) or
/// a 'single quoted' one (with `\'`), and a closing quote must end its word. A NUL byte ends
/// the line. `None` for a quote left open or followed by more of the word.
fn split_inline(line: &[u8]) -> Option<Command> {
    let line = &line[..line.iter().position(|&b| b == 0).unwrap_or(line.len())];
    let space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let hex_at = |i: usize| line.get(i).copied().filter(u8::is_ascii_hexdigit).map(hex);
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && space(line[i]) {
            i += 1;
        }
        if i == line.len() {
            return Some(args);
        }
        let mut word = Vec::new();
        let mut quote = None;
        loop {
            let Some(q) = quote else {
                match line.get(i) {
                    None | Some(b' ' | b'\t' | b'\n' | b'\r') => break,
                    Some(&q @ (b'"' | b'\'')) => quote = Some(q),
                    Some(&b) => word.push(b),
                }
                i += 1;
                continue;
            };
            let b = *line.get(i)?;
            let next = line.get(i + 1).copied();
            if q == b'"' && b == b'\\' && next == Some(b'x') {
                if let (Some(high), Some(low)) = (hex_at(i + 2), hex_at(i + 3)) {
                    word.push(high * 16 + low);
                    i += 4;
                    continue;
                }
            }
            if let (b'"', b'\\', Some(escaped)) = (q, b, next) {
                word.push(match escaped {
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'b' => 0x08,
                    b'a' => 0x07,
                    other => other,
                });
                i += 2;
            } else if q == b'\'' && b == b'\\' && next == Some(b'\'') {
                word.push(b'\'');
                i += 2;
            } else if b == q {
                if next.is_some_and(|c| !space(c)) {
                    return None;
                }
                i += 1;
                break;
            } else {
                word.push(b);
                i += 1;
            }
        }
        args.push(word);
    }
}

fn hex(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        _ => digit - b'A' + 10,
    }
}

/// Parses a decimal integer as Redis's `string2ll` does: an optional `-`, no `+`, no blanks,
/// no leading zeros, within `i64`.
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 || !(b'1'..=b'9').contains(&digits[0]) {
        return None;
    }
    let mut value: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        0i64.checked_sub_unsigned(value)
    } else {
        i64::try_from(value).ok()
    }
}

/// A reply, encoded as RESP2 by [`encode`](Reply::encode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// `+text`: a status such as `OK` or `PONG`.
    Status(&'static str),
    /// `-text`: an error; the text starts with its code (`ERR ...`).
    Error(String),
    /// `:n`.
    Integer(i64),
    /// `$len` and the bytes.
    Bulk(Vec<u8>),
    /// `$-1`: no value.
    Nil,
    /// `*n` and the elements.
    Array(Vec<Reply>),
}

impl Reply {
    /// `+OK`.
    pub(crate) const OK: Reply = Reply::Status("OK");

    /// `-ERR text`.
    pub(crate) fn err(text: impl fmt::Display) -> Reply {
        Reply::Error(format!("ERR {text}"))
    }

    /// A bulk string from text.
    pub(crate) fn text(text: &str) -> Reply {
        Reply::Bulk(text.as_bytes().to_vec())
    }

    /// Appends the RESP2 encoding to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        // Writes into a `Vec` cannot fail.
        match self {
            Reply::Status(text) => {
                out.push(b'+');
                out.extend_from_slice(text.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Reply::Error(text) => {
                out.push(b'-');
                // A line break would end the error early and desynchronise the client.
                out.extend(
                    text.bytes()
                        .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
                );
                out.extend_from_slice(b"\r\n");
            }
            Reply::Integer(n) => {
                let _ = write!(out, ":{n}\r\n");
            }
            Reply::Bulk(bytes) => {
                let _ = write!(out, "${}\r\n", bytes.len());
                out.extend_from_slice(bytes);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::Array(items) => {
                let _ = write!(out, "*{}\r\n", items.len());
                for item in items {
                    item.encode(out);
                }
            }
        }
    }
}
