//! The Redis-protocol key-value server of `crates/eddy/examples/kv_server/`, run in-process
//! on an eddy runtime and driven from plain threads: by the `redis` crate (synchronous) for
//! the commands, and by raw `std::net::TcpStream`s for pipelining, inline commands and
//! malformed input. The expected replies are Redis's own (checked against `redis-server`
//! 7.0 when they were written).

// The example's modules, compiled here as they are there; the test uses only part of them.
#[allow(dead_code)]
#[path = "../../crates/eddy/examples/kv_server/resp.rs"]
mod resp;
#[allow(dead_code)]
#[path = "../../crates/eddy/examples/kv_server/server.rs"]
mod server;
#[allow(dead_code)]
#[path = "../../crates/eddy/examples/kv_server/session.rs"]
mod session;
#[allow(dead_code)]
#[path = "../../crates/eddy/examples/kv_server/store.rs"]
mod store;

use std::io::{ErrorKind, Read, Write};
use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use eddy_tests::{wait_until, with_deadline, ServerThread, PATIENCE};

/// Long enough for a broken server to fail a test instead of hanging it.
const LIMIT: Duration = Duration::from_secs(120);

/// The example's server on an [`eddy_tests::ServerThread`].
struct TestServer(ServerThread<server::Served>);

impl TestServer {
    fn start(options: server::Options) -> TestServer {
        TestServer(ServerThread::start(move |listener, shutdown| async move {
            let store = Arc::new(store::Store::new());
            server::serve(listener, store, options, shutdown)
                .await
                .unwrap()
        }))
    }

    fn with_defaults() -> TestServer {
        TestServer::start(server::Options::default())
    }

    /// A `redis` crate connection (it sends `CLIENT SETINFO` twice on connect).
    fn client(&self) -> redis::Connection {
        let client = redis::Client::open(format!("redis://{}/", self.0.addr())).unwrap();
        let con = client
            .get_connection_with_timeout(PATIENCE)
            .expect("connect with the redis crate");
        con.set_read_timeout(Some(PATIENCE)).unwrap();
        con.set_write_timeout(Some(PATIENCE)).unwrap();
        con
    }

    /// A plain socket whose reads give up after [`PATIENCE`].
    fn raw(&self) -> std::net::TcpStream {
        let s = std::net::TcpStream::connect(self.0.addr()).expect("connect");
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        s.set_write_timeout(Some(PATIENCE)).unwrap();
        s
    }

    /// Shuts the server down and returns what `serve` reports.
    fn stop(self) -> server::Served {
        self.0.stop()
    }
}

/// Runs `args` and returns the reply (errors included, as `Err("ERR ...")`).
fn run(con: &mut redis::Connection, args: &[&[u8]]) -> Result<Value, String> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query::<Value>(con).map_err(|e| {
        assert_eq!(e.code(), Some("ERR"), "not a server error: {e}");
        format!("ERR {}", e.detail().unwrap_or(""))
    })
}

/// `run` for text arguments; panics on an error reply.
fn ok(con: &mut redis::Connection, line: &str) -> Value {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    run(con, &args).unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// `run` for text arguments; panics unless the reply is an error, and returns its text.
fn err(con: &mut redis::Connection, line: &str) -> String {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    match run(con, &args) {
        Err(e) => e,
        Ok(v) => panic!("{line}: expected an error, got {v:?}"),
    }
}

fn bulk(text: &str) -> Value {
    Value::BulkString(text.as_bytes().to_vec())
}

fn int(n: i64) -> Value {
    Value::Int(n)
}

/// A RESP request, encoded here by hand rather than by the server's own code.
fn request(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Reads exactly `expected.len()` bytes and compares them with `expected`.
fn expect_bytes(s: &mut std::net::TcpStream, expected: &[u8]) {
    let mut got = vec![0u8; expected.len()];
    s.read_exact(&mut got).unwrap_or_else(|e| {
        panic!(
            "waiting for {:?}: {e}",
            String::from_utf8_lossy(expected)
                .chars()
                .take(200)
                .collect::<String>()
        )
    });
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected)
    );
}

/// Reads until the server closes the connection; fails if it sends anything more first.
fn expect_closed(s: &mut std::net::TcpStream) {
    let mut rest = Vec::new();
    match s.read_to_end(&mut rest) {
        Ok(_) => {}
        // A close with unread input is a reset; it is a close all the same.
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the connection was not closed: {e}"),
    }
    assert!(
        rest.is_empty(),
        "more after the last reply: {:?}",
        String::from_utf8_lossy(&rest)
    );
}

/// `PING` answered on `s`: the connection is still served.
fn assert_serves(s: &mut std::net::TcpStream) {
    s.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    expect_bytes(s, b"+PONG\r\n");
}

/// PING, ECHO, GET, SET with NX/XX/GET/KEEPTTL, DEL, EXISTS, MGET, MSET, DBSIZE, FLUSHDB and
/// SELECT through the `redis` crate, with the replies Redis gives.
#[test]
fn string_commands_answer_as_redis_does() {
    with_deadline(LIMIT, || {
        let server = TestServer::with_defaults();
        let mut c = server.client();
        assert_eq!(ok(&mut c, "PING"), Value::SimpleString("PONG".into()));
        assert_eq!(ok(&mut c, "PING hello"), bulk("hello"));
        assert_eq!(ok(&mut c, "ECHO hi"), bulk("hi"));
        // Binary-safe: any bytes in keys and values.
        let binary: &[u8] = b"\0\r\n\xff";
        assert_eq!(run(&mut c, &[b"SET", binary, binary]), Ok(Value::Okay));
        assert_eq!(
            run(&mut c, &[b"GET", binary]),
            Ok(Value::BulkString(binary.into()))
        );

        assert_eq!(ok(&mut c, "GET k"), Value::Nil);
        assert_eq!(ok(&mut c, "SET k v1"), Value::Okay);
        assert_eq!(ok(&mut c, "GET k"), bulk("v1"));
        // NX: only if absent; XX: only if present; a refused SET answers nil.
        assert_eq!(ok(&mut c, "SET k v2 NX"), Value::Nil);
        assert_eq!(ok(&mut c, "GET k"), bulk("v1"));
        assert_eq!(ok(&mut c, "SET fresh v NX"), Value::Okay);
        assert_eq!(ok(&mut c, "SET absent v XX"), Value::Nil);
        assert_eq!(ok(&mut c, "EXISTS absent"), int(0));
        assert_eq!(ok(&mut c, "SET k v3 XX"), Value::Okay);
        assert_eq!(ok(&mut c, "GET k"), bulk("v3"));
        // GET: the old value instead of OK, also when NX refuses.
        assert_eq!(ok(&mut c, "SET k v4 GET"), bulk("v3"));
        assert_eq!(ok(&mut c, "SET new v GET"), Value::Nil);
        assert_eq!(ok(&mut c, "SET k v5 NX GET"), bulk("v4"));
        assert_eq!(ok(&mut c, "GET k"), bulk("v4"));
        assert_eq!(err(&mut c, "SET k v NX XX"), "ERR syntax error");
        assert_eq!(err(&mut c, "SET k v XX NX"), "ERR syntax error");
        assert_eq!(err(&mut c, "SET k v FOO"), "ERR syntax error");

        // DEL and EXISTS count every key named, EXISTS repeats included.
        assert_eq!(ok(&mut c, "DEL k fresh absent"), int(2));
        assert_eq!(ok(&mut c, "DEL k"), int(0));
        ok(&mut c, "SET a 1");
        assert_eq!(ok(&mut c, "EXISTS a a b"), int(2));

        assert_eq!(ok(&mut c, "MSET a 10 b 20"), Value::Okay);
        assert_eq!(
            ok(&mut c, "MGET a b nothing"),
            Value::Array(vec![bulk("10"), bulk("20"), Value::Nil])
        );
        assert_eq!(
            err(&mut c, "MSET a 1 b"),
            "ERR wrong number of arguments for 'mset' command"
        );

        // `binary`, `new`, `a`, `b`.
        assert_eq!(ok(&mut c, "DBSIZE"), int(4));
        assert_eq!(ok(&mut c, "FLUSHDB"), Value::Okay);
        assert_eq!(ok(&mut c, "DBSIZE"), int(0));
        assert_eq!(ok(&mut c, "FLUSHDB ASYNC"), Value::Okay);
        assert_eq!(ok(&mut c, "flushdb sync"), Value::Okay);
        assert_eq!(err(&mut c, "FLUSHDB now"), "ERR syntax error");

        // One database.
        assert_eq!(ok(&mut c, "SELECT 0"), Value::Okay);
        assert_eq!(err(&mut c, "SELECT 1"), "ERR DB index is out of range");
        assert_eq!(
            err(&mut c, "SELECT x"),
            "ERR value is not an integer or out of range"
        );
        // Command names are case-insensitive.
        assert_eq!(ok(&mut c, "set Key V"), Value::Okay);
        assert_eq!(ok(&mut c, "gEt Key"), bulk("V"));
        assert_eq!(ok(&mut c, "get key"), Value::Nil);
    });
}

/// INCR and DECR: a missing key counts as 0; a value that is not exactly a 64-bit integer
/// is refused; overflow is refused; the key's deadline is kept.
#[test]
fn incr_and_decr() {
    with_deadline(LIMIT, || {
        let server = TestServer::with_defaults();
        let mut c = server.client();
        assert_eq!(ok(&mut c, "INCR n"), int(1));
        assert_eq!(ok(&mut c, "INCR n"), int(2));
        assert_eq!(ok(&mut c, "DECR n"), int(1));
        assert_eq!(ok(&mut c, "DECR m"), int(-1));
        assert_eq!(ok(&mut c, "GET n"), bulk("1"));
        for bad in ["abc", "+1", "01", "-0", "1.5", ""] {
            assert_eq!(
                run(&mut c, &[b"SET", b"s", bad.as_bytes()]),
                Ok(Value::Okay)
            );
            assert_eq!(
                err(&mut c, "INCR s"),
                "ERR value is not an integer or out of range",
                "INCR of {bad:?}"
            );
        }
        assert_eq!(run(&mut c, &[b"SET", b"s", b" 1"]), Ok(Value::Okay));
        assert_eq!(
            err(&mut c, "DECR s"),
            "ERR value is not an integer or out of range"
        );
        ok(&mut c, "SET big 9223372036854775807");
        assert_eq!(
            err(&mut c, "INCR big"),
            "ERR increment or decrement would overflow"
        );
        ok(&mut c, "SET small -9223372036854775808");
        assert_eq!(
            err(&mut c, "DECR small"),
            "ERR increment or decrement would overflow"
        );
        assert_eq!(ok(&mut c, "GET small"), bulk("-9223372036854775808"));
        ok(&mut c, "SET t 5 EX 1000");
        assert_eq!(ok(&mut c, "INCR t"), int(6));
        assert!(matches!(ok(&mut c, "TTL t"), Value::Int(1..=1000)));
        assert_eq!(
            err(&mut c, "INCR a b"),
            "ERR wrong number of arguments for 'incr' command"
        );
    });
}

/// SET's EX/PX/EXAT/PXAT/KEEPTTL, EXPIRE and PEXPIRE with NX/XX/GT/LT, TTL and PTTL (-2 for
/// no key, -1 for no deadline), and the error replies for bad times and bad options.
#[test]
fn expiry_options_and_time_to_live() {
    with_deadline(LIMIT, || {
        let server = TestServer::with_defaults();
        let mut c = server.client();
        let ttl = |c: &mut redis::Connection, key: &str| match ok(c, &format!("TTL {key}")) {
            Value::Int(n) => n,
            other => panic!("TTL answered {other:?}"),
        };
        let pttl = |c: &mut redis::Connection, key: &str| match ok(c, &format!("PTTL {key}")) {
            Value::Int(n) => n,
            other => panic!("PTTL answered {other:?}"),
        };
        assert_eq!(ttl(&mut c, "none"), -2);
        assert_eq!(pttl(&mut c, "none"), -2);
        ok(&mut c, "SET plain v");
        assert_eq!(ttl(&mut c, "plain"), -1);
        assert_eq!(pttl(&mut c, "plain"), -1);

        // Deadlines far enough away that no load makes them pass during the test.
        ok(&mut c, "SET ex v EX 1000");
        assert!((1..=1000).contains(&ttl(&mut c, "ex")));
        ok(&mut c, "SET px v PX 1000000");
        assert!((1..=1_000_000).contains(&pttl(&mut c, "px")));
        assert!((1..=1000).contains(&ttl(&mut c, "px")));
        ok(&mut c, "SET exat v EXAT 99999999999");
        assert!(ttl(&mut c, "exat") > 1000);
        ok(&mut c, "SET pxat v PXAT 99999999999000");
        assert!(ttl(&mut c, "pxat") > 1000);
        // The last of a repeated option counts.
        ok(&mut c, "SET twice v EX 10 EX 1000");
        assert!(ttl(&mut c, "twice") > 10);
        // A deadline already past: the key is set and gone at once.
        assert_eq!(ok(&mut c, "SET past v EXAT 1"), Value::Okay);
        assert_eq!(ok(&mut c, "EXISTS past"), int(0));
        // KEEPTTL keeps the deadline; a plain SET drops it.
        ok(&mut c, "SET ex w KEEPTTL");
        assert!(ttl(&mut c, "ex") > 0);
        assert_eq!(ok(&mut c, "GET ex"), bulk("w"));
        ok(&mut c, "SET ex w");
        assert_eq!(ttl(&mut c, "ex"), -1);
        // MSET drops deadlines too.
        ok(&mut c, "MSET px v");
        assert_eq!(ttl(&mut c, "px"), -1);

        for bad in ["EX 0", "EX -1", "PX 0", "PXAT -5", "EX 9223372036854776"] {
            assert_eq!(
                err(&mut c, &format!("SET k v {bad}")),
                "ERR invalid expire time in 'set' command",
                "SET k v {bad}"
            );
        }
        assert_eq!(
            err(&mut c, "SET k v EX ten"),
            "ERR value is not an integer or out of range"
        );
        for bad in [
            "EX",
            "EX 10 PX 10",
            "KEEPTTL EX 10",
            "EX 10 KEEPTTL",
            "PX 1 EXAT 5",
        ] {
            assert_eq!(
                err(&mut c, &format!("SET k v {bad}")),
                "ERR syntax error",
                "SET k v {bad}"
            );
        }
        assert_eq!(ok(&mut c, "EXISTS k"), int(0));

        // EXPIRE and PEXPIRE: 1 if the deadline was set, 0 if not (no key, or an option
        // refused it).
        assert_eq!(ok(&mut c, "EXPIRE none 10"), int(0));
        ok(&mut c, "SET e v");
        assert_eq!(ok(&mut c, "EXPIRE e 500 XX"), int(0));
        assert_eq!(ok(&mut c, "EXPIRE e 500 GT"), int(0));
        assert_eq!(ok(&mut c, "EXPIRE e 500 NX"), int(1));
        assert_eq!(ok(&mut c, "EXPIRE e 900 NX"), int(0));
        assert_eq!(ok(&mut c, "EXPIRE e 100 GT"), int(0));
        assert_eq!(ok(&mut c, "EXPIRE e 900 GT"), int(1));
        assert_eq!(ok(&mut c, "EXPIRE e 1000 LT"), int(0));
        assert_eq!(ok(&mut c, "PEXPIRE e 800000 LT"), int(1));
        assert!((501..=800).contains(&ttl(&mut c, "e")));
        assert_eq!(ok(&mut c, "PEXPIRE e 700000 XX"), int(1));
        assert!((1..=700).contains(&ttl(&mut c, "e")));
        ok(&mut c, "SET f v");
        // No deadline is infinitely far: LT always beats it.
        assert_eq!(ok(&mut c, "EXPIRE f 100 LT"), int(1));
        // A time not in the future deletes the key.
        assert_eq!(ok(&mut c, "EXPIRE f -1"), int(1));
        assert_eq!(ok(&mut c, "EXISTS f"), int(0));
        ok(&mut c, "SET f v");
        assert_eq!(ok(&mut c, "PEXPIRE f 0"), int(1));
        assert_eq!(ok(&mut c, "EXISTS f"), int(0));

        assert_eq!(
            err(&mut c, "EXPIRE e ten"),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            err(&mut c, "EXPIRE e 9223372036854776"),
            "ERR invalid expire time in 'expire' command"
        );
        assert_eq!(
            err(&mut c, "PEXPIRE e 9223372036854775807"),
            "ERR invalid expire time in 'pexpire' command"
        );
        assert_eq!(
            err(&mut c, "EXPIRE e 10 SOON"),
            "ERR Unsupported option SOON"
        );
        assert_eq!(
            err(&mut c, "EXPIRE e 10 NX XX"),
            "ERR NX and XX, GT or LT options at the same time are not compatible"
        );
        assert_eq!(
            err(&mut c, "EXPIRE e 10 GT LT"),
            "ERR GT and LT options at the same time are not compatible"
        );
        assert_eq!(
            err(&mut c, "EXPIRE e"),
            "ERR wrong number of arguments for 'expire' command"
        );
        assert_eq!(
            err(&mut c, "TTL a b"),
            "ERR wrong number of arguments for 'ttl' command"
        );
    });
}

/// An unknown command and a wrong argument count are error replies, in Redis's words, and
/// the connection goes on.
#[test]
fn errors_are_replies_and_the_connection_goes_on() {
    with_deadline(LIMIT, || {
        let server = TestServer::with_defaults();
        let mut c = server.client();
        assert_eq!(
            err(&mut c, "FOO a"),
            "ERR unknown command 'FOO', with args beginning with: 'a' "
        );
        assert_eq!(
            err(&mut c, "foo"),
            "ERR unknown command 'foo', with args beginning with: "
        );
        for (line, name) in [
            ("GET", "get"),
            ("GET a b", "get"),
            ("SET k", "set"),
            ("PING a b", "ping"),
            ("ECHO", "echo"),
            ("DEL", "del"),
            ("EXISTS", "exists"),
            ("DECR", "decr"),
            ("PEXPIRE k", "pexpire"),
            ("PTTL", "pttl"),
            ("MGET", "mget"),
            ("MSET k", "mset"),
            ("DBSIZE x", "dbsize"),
            ("SELECT", "select"),
        ] {
            assert_eq!(
                err(&mut c, line),
                format!("ERR wrong number of arguments for '{name}' command"),
                "{line}"
            );
        }
        ok(&mut c, "SET k still-here");
        assert_eq!(ok(&mut c, "GET k"), bulk("still-here"));

        // The exact bytes, with the argument list cut after 128 bytes.
        let mut s = server.raw();
        let long = "x".repeat(200);
        s.write_all(&request(&[b"nope", b"a", long.as_bytes(), b"b"]))
            .unwrap();
        expect_bytes(
            &mut s,
            format!(
                "-ERR unknown command 'nope', with args beginning with: 'a' '{}' \r\n",
                &long[..124]
            )
            .as_bytes(),
        );
        assert_serves(&mut s);
    });
}

/// What tools send on connect: `COMMAND` (redis-cli), `CONFIG GET` (redis-benchmark),
/// `CLIENT SETINFO` (the `redis` crate, already on connect), and QUIT.
#[test]
fn what_tools_ask_is_answered() {
    with_deadline(LIMIT, || {
        let server = TestServer::with_defaults();
        let mut c = server.client();
        let Value::Array(all) = ok(&mut c, "COMMAND") else {
            panic!("COMMAND is not an array");
        };
        assert_eq!(ok(&mut c, "COMMAND COUNT"), int(all.len() as i64));
        let Value::Array(info) = ok(&mut c, "COMMAND INFO get nothing") else {
            panic!("COMMAND INFO is not an array");
        };
        assert_eq!(info.len(), 2);
        let Value::Array(get) = &info[0] else {
            panic!("no entry for get: {info:?}");
        };
        assert_eq!((&get[0], &get[1]), (&bulk("get"), &int(2)));
        assert_eq!(info[1], Value::Nil);
        assert_eq!(ok(&mut c, "COMMAND DOCS"), Value::Array(vec![]));
        assert_eq!(
            err(&mut c, "COMMAND FOO"),
            "ERR unknown subcommand 'FOO'. Try COMMAND HELP."
        );

        assert_eq!(
            ok(&mut c, "CONFIG GET save"),
            Value::Array(vec![bulk("save"), bulk("")])
        );
        assert_eq!(
            ok(&mut c, "CONFIG GET APPEND*"),
            Value::Array(vec![bulk("appendonly"), bulk("no")])
        );
        assert_eq!(ok(&mut c, "CONFIG GET maxmemory"), Value::Array(vec![]));
        assert_eq!(
            err(&mut c, "CONFIG GET"),
            "ERR wrong number of arguments for 'config|get' command"
        );
        assert_eq!(
            err(&mut c, "CONFIG SET save x"),
            "ERR unknown subcommand 'SET'. Try CONFIG HELP."
        );
        assert_eq!(ok(&mut c, "CLIENT SETINFO LIB-NAME test"), Value::Okay);
        assert_eq!(
            err(&mut c, "CLIENT KILL x"),
            "ERR unknown subcommand 'KILL'. Try CLIENT HELP."
        );

        let mut s = server.raw();
        s.write_all(b"*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n")
            .unwrap();
        expect_bytes(&mut s, b"+OK\r\n");
        expect_closed(&mut s);
    });
}

/// Inline commands, as redis-cli sends them over telnet: words separated by blanks, quoted
/// words with escapes, empty lines skipped; `*0` and `*-1` are skipped too.
#[test]
fn inline_commands_and_empty_requests() {
    with_deadline(LIMIT, || {
        let server = TestServer::with_defaults();
        let mut s = server.raw();
        s.write_all(
            b"PING\r\n\r\n\n  ECHO   hello  \n\
              SET k \"a \\\"b\\\"\\x41\\n\"\r\nGET k\r\n\
              SET j 'it\\'s' \r\nGET j\r\n\
              *0\r\n*-1\r\nECHO \"\"\r\nEC\"HO\" x\r\n",
        )
        .unwrap();
        expect_bytes(
            &mut s,
            b"+PONG\r\n$5\r\nhello\r\n+OK\r\n$7\r\na \"b\"A\n\r\n+OK\r\n$4\r\nit's\r\n\
              $0\r\n\r\n$1\r\nx\r\n",
        );
        assert_serves(&mut s);
    });
}

/// 1,000 requests in one write get 1,000 replies, in order, in whatever writes the server
/// makes; the connection goes on after them.
#[test]
fn a_thousand_pipelined_requests_get_their_replies_in_order() {
    with_deadline(LIMIT, || {
        let server = TestServer::with_defaults();
        let mut s = server.raw();
        let mut requests = Vec::new();
        let mut replies = Vec::new();
        let mut counter = 0;
        for i in 0..1000 {
            let key = format!("key:{}", i / 3);
            let value = format!("value:{i}");
            match i % 3 {
                0 => {
                    requests.extend(request(&[b"SET", key.as_bytes(), value.as_bytes()]));
                    replies.extend_from_slice(b"+OK\r\n");
                }
                1 => {
                    let stored = format!("value:{}", i - 1);
                    requests.extend(request(&[b"GET", key.as_bytes()]));
                    replies.extend(format!("${}\r\n{stored}\r\n", stored.len()).into_bytes());
                }
                _ => {
                    counter += 1;
                    requests.extend(request(&[b"INCR", b"counter"]));
                    replies.extend(format!(":{counter}\r\n").into_bytes());
                }
            }
        }
        s.write_all(&requests).unwrap();
        expect_bytes(&mut s, &replies);
        assert_serves(&mut s);
        let mut c = server.client();
        assert_eq!(ok(&mut c, "GET counter"), bulk(&counter.to_string()));
    });
}

/// Malformed RESP: the requests before it are answered, then `-ERR Protocol error: ...`,
/// then the server closes the connection; a connection opened before keeps being served,
/// and so do new ones.
#[test]
fn malformed_resp_is_answered_and_closes_only_its_connection() {
    with_deadline(LIMIT, || {
        let server = TestServer::with_defaults();
        let mut bystander = server.raw();
        assert_serves(&mut bystander);
        let mut client = server.client();
        let cases: &[(&[u8], &str)] = &[
            (b"*1\r\nx\r\n", "expected '$', got 'x'"),
            (b"*2\r\n$3\r\nGET\r\n:1\r\n", "expected '$', got ':'"),
            (b"*abc\r\n", "invalid multibulk length"),
            (b"*\r\n", "invalid multibulk length"),
            (b"*3000000000\r\n", "invalid multibulk length"),
            (b"*1\r\n$abc\r\n", "invalid bulk length"),
            (b"*1\r\n$-1\r\n", "invalid bulk length"),
            (b"*1\r\n$04\r\nPING\r\n", "invalid bulk length"),
            (b"*1\r\n$3\r\nPING\r\n", "bulk data not followed by CRLF"),
            (b"ECHO \"open\r\n", "unbalanced quotes in request"),
            (b"ECHO \"a\"b\r\n", "unbalanced quotes in request"),
        ];
        for (input, error) in cases {
            let mut s = server.raw();
            let mut bytes = b"*1\r\n$4\r\nPING\r\n".to_vec();
            bytes.extend_from_slice(input);
            s.write_all(&bytes).unwrap();
            expect_bytes(
                &mut s,
                format!("+PONG\r\n-ERR Protocol error: {error}\r\n").as_bytes(),
            );
            expect_closed(&mut s);
            assert_serves(&mut bystander);
            assert_eq!(ok(&mut client, "ECHO fine"), bulk("fine"));
        }

        // A line end that never comes: refused once more than 64 KiB wait for it. Each
        // input is exactly one byte over, so the server has read all of it when it closes.
        for (start, consumed, error) in [
            (&b"x"[..], 0, "too big inline request"),
            (b"*1", 0, "too big mbulk count string"),
            (b"*1\r\n$1", 4, "too big bulk count string"),
        ] {
            let mut s = server.raw();
            let mut bytes = start.to_vec();
            bytes.resize(consumed + 64 * 1024 + 1, b'1');
            s.write_all(&bytes).unwrap();
            expect_bytes(
                &mut s,
                format!("-ERR Protocol error: {error}\r\n").as_bytes(),
            );
            expect_closed(&mut s);
            assert_serves(&mut bystander);
        }
    });
}

/// A bulk length over the cap is refused as soon as its header is in, without waiting for
/// (or making room for) the body, which is never sent; one at the cap is served; a
/// connection in the middle of a request does not hold up the others.
#[test]
fn a_bulk_length_over_the_cap_is_refused_on_its_header() {
    with_deadline(LIMIT, || {
        let server = TestServer::start(server::Options {
            max_bulk_len: 16,
            ..server::Options::default()
        });
        let mut bystander = server.raw();
        assert_serves(&mut bystander);

        let mut over = server.raw();
        over.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$17\r\n")
            .unwrap();
        expect_bytes(&mut over, b"-ERR Protocol error: invalid bulk length\r\n");
        expect_closed(&mut over);

        // A request at the cap, sent in two parts: between them the server serves others.
        let mut at_cap = server.raw();
        at_cap
            .write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$16\r\n01234567")
            .unwrap();
        assert_serves(&mut bystander);
        at_cap.write_all(b"89abcdef\r\n").unwrap();
        expect_bytes(&mut at_cap, b"+OK\r\n");
        let mut c = server.client();
        assert_eq!(ok(&mut c, "GET k"), bulk("0123456789abcdef"));
        assert_eq!(
            run(&mut c, &[b"SET", b"k", &[b'x'; 17]]),
            Err("ERR Protocol error: invalid bulk length".into())
        );
        assert_serves(&mut bystander);
        drop(server);

        // The default cap, 512 MiB.
        let server = TestServer::with_defaults();
        let mut bystander = server.raw();
        for header in [&b"$1000000000000"[..], b"$536870913"] {
            let mut s = server.raw();
            let mut bytes = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n".to_vec();
            bytes.extend_from_slice(header);
            bytes.extend_from_slice(b"\r\n");
            s.write_all(&bytes).unwrap();
            expect_bytes(&mut s, b"-ERR Protocol error: invalid bulk length\r\n");
            expect_closed(&mut s);
            assert_serves(&mut bystander);
        }
    });
}

/// Lazy expiry alone (no sweep): a key with a short PX becomes invisible to every command
/// once its deadline passes, and reading it removes it.
#[test]
fn a_key_with_a_short_px_becomes_invisible() {
    with_deadline(LIMIT, || {
        let server = TestServer::start(server::Options {
            sweep_every: None,
            ..server::Options::default()
        });
        let mut c = server.client();
        ok(&mut c, "SET brief v PX 20");
        ok(&mut c, "SET lasting v PX 1000000");
        assert!(
            wait_until(PATIENCE, || ok(&mut c, "GET brief") == Value::Nil),
            "the key is still there long after its deadline"
        );
        assert_eq!(ok(&mut c, "EXISTS brief"), int(0));
        assert_eq!(ok(&mut c, "TTL brief"), int(-2));
        assert_eq!(ok(&mut c, "PTTL brief"), int(-2));
        assert_eq!(
            ok(&mut c, "MGET brief lasting"),
            Value::Array(vec![Value::Nil, bulk("v")])
        );
        assert_eq!(ok(&mut c, "DBSIZE"), int(1));
        // Each command sees it gone, not only GET. (Polled with commands that leave a live
        // key and its deadline as they are, or that show the key gone once it is.)
        for (set, check, gone) in [
            ("SET e v PX 20", "EXISTS e", int(0)),
            ("SET t v PX 20", "TTL t", int(-2)),
            ("SET i 7 PX 20", "INCR i", int(1)),
            ("SET x v PX 20", "SET x w XX KEEPTTL", Value::Nil),
            ("SET n v PX 20", "SET n w NX", Value::Okay),
        ] {
            ok(&mut c, set);
            assert!(
                wait_until(PATIENCE, || ok(&mut c, check) == gone),
                "{check} after {set}: still sees the key"
            );
        }
        // DEL does not count an expired key: a probe set after it expires last.
        ok(&mut c, "SET d v PX 20");
        ok(&mut c, "SET probe v PX 20");
        assert!(wait_until(PATIENCE, || ok(&mut c, "GET probe") == Value::Nil));
        assert_eq!(ok(&mut c, "DEL d"), int(0));
        assert_eq!(ok(&mut c, "DBSIZE"), int(3));
    });
}

/// The sweep removes expired keys that nobody reads: with it, DBSIZE (which counts expired
/// keys not yet removed, as Redis's does) falls to the keys still alive; without it, they
/// stay counted.
#[test]
fn the_sweep_removes_expired_keys_nobody_reads() {
    with_deadline(LIMIT, || {
        let set_keys = |c: &mut redis::Connection| {
            for i in 0..200 {
                ok(c, &format!("SET key:{i} v PX {}", 1 + i % 20));
            }
            ok(c, "SET lasting v");
        };

        // Without the sweep: a probe set after them expires last; once it has, they all
        // have, and they are still counted.
        let server = TestServer::start(server::Options {
            sweep_every: None,
            ..server::Options::default()
        });
        let mut c = server.client();
        set_keys(&mut c);
        ok(&mut c, "SET probe v PX 20");
        assert!(wait_until(PATIENCE, || ok(&mut c, "GET probe") == Value::Nil));
        assert_eq!(ok(&mut c, "DBSIZE"), int(201));
        drop(server);

        let server = TestServer::start(server::Options {
            sweep_every: Some(Duration::from_millis(10)),
            ..server::Options::default()
        });
        let mut c = server.client();
        // Keys whose deadline was lifted or moved away stay: what the sweep holds for their
        // first deadlines is out of date.
        ok(&mut c, "SET kept v PX 20");
        ok(&mut c, "SET moved v PX 20");
        ok(&mut c, "SET kept v");
        ok(&mut c, "PEXPIRE moved 1000000");
        set_keys(&mut c);
        assert!(
            wait_until(PATIENCE, || ok(&mut c, "DBSIZE") == int(3)),
            "expired keys are still stored: DBSIZE {:?}",
            ok(&mut c, "DBSIZE")
        );
        // One more key for the sweep: once it is gone, a sweep that began after the one
        // above has run to its end.
        ok(&mut c, "SET last v PX 1");
        assert!(wait_until(PATIENCE, || ok(&mut c, "DBSIZE") == int(3)));
        assert_eq!(
            ok(&mut c, "MGET lasting kept moved"),
            Value::Array(vec![bulk("v"); 3])
        );
    });
}

/// Shutdown: idle connections are closed at once; one whose client stopped reading its
/// replies is cut off after the grace; `serve` returns either way.
#[test]
fn shutdown_closes_idle_connections_and_cuts_off_stuck_ones() {
    with_deadline(LIMIT, || {
        let server = TestServer::start(server::Options {
            grace: Duration::from_millis(200),
            ..server::Options::default()
        });
        let mut c = server.client();
        let big = vec![b'v'; 1 << 20];
        assert_eq!(run(&mut c, &[b"SET", b"big", &big]), Ok(Value::Okay));
        let mut idle = server.raw();
        assert_serves(&mut idle);
        // 64 MiB of replies that this client does not read: the server's write waits.
        let mut stuck = server.raw();
        let gets: Vec<u8> = (0..64).flat_map(|_| request(&[b"GET", b"big"])).collect();
        stuck.write_all(&gets).unwrap();
        let mut first = [0u8; 1];
        stuck.read_exact(&mut first).unwrap();

        let served = server.stop();
        assert!(served.connections >= 3, "{served:?}");
        assert!(served.cut_off >= 1, "{served:?}");
        expect_closed(&mut idle);
        // Whatever was written before the cut, then the end.
        let mut rest = Vec::new();
        let _ = stuck.read_to_end(&mut rest);
        assert!(rest.len() < 64 << 20);
    });
}
