//! The accept loop under descriptor exhaustion, in a child process with a low
//! `RLIMIT_NOFILE`: while out of descriptors the server backs off (its CPU time stays low)
//! and reports the condition once; when descriptors are freed, accepting resumes.
//!
//! The test binary re-runs itself as the child (`EDDY_ACCEPT_CHILD=1`), so the low limit
//! never touches the other tests.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use eddy_tests::{wait_until, with_deadline, PATIENCE};

const CHILD_ENV: &str = "EDDY_ACCEPT_CHILD";

fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we pass and has no other effects.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut u), 0);
        u
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// The server side, run in the child process.
#[test]
fn accept_exhaustion_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return; // only meaningful as the child of `accept_backs_off_and_resumes`
    }
    let limit = libc::rlimit {
        rlim_cur: 48,
        rlim_max: 48,
    };
    // SAFETY: setrlimit reads the struct we pass; lowering our own limit is always allowed.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);

    let reports = Arc::new(AtomicUsize::new(0));
    let r = reports.clone();
    let rt = eddy::Builder::new()
        .workers(2)
        .exception_handler(move |ctx: &eddy::ExceptionContext| {
            if ctx.message().contains("ran out of file descriptors") {
                r.fetch_add(1, Ordering::SeqCst);
            }
        })
        .build()
        .unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let a = accepted.clone();
    let server = rt
        .block_on(eddy::net::start_server("127.0.0.1:0", move |mut r, w| {
            a.fetch_add(1, Ordering::SeqCst);
            async move {
                let _ = r.read(1).await; // hold the connection until the client closes
                drop(w);
            }
        }))
        .unwrap();
    println!("PORT {}", server.local_addr().port());

    assert!(
        wait_until(PATIENCE, || reports.load(Ordering::SeqCst) > 0),
        "never ran out of descriptors"
    );
    // CPU time used during one second of exhaustion. The sleep waits for nothing: it is the
    // window the CPU time is measured over (a loop that retried at once would use most of
    // it, one that backs off almost none, however loaded the machine).
    let before = cpu_time();
    std::thread::sleep(Duration::from_secs(1));
    let cpu = cpu_time() - before;
    let at_exhaustion = accepted.load(Ordering::SeqCst);
    println!(
        "EXHAUSTED cpu_ms={} accepted={at_exhaustion} reports={}",
        cpu.as_millis(),
        reports.load(Ordering::SeqCst)
    );

    if !wait_until(PATIENCE, || {
        accepted.load(Ordering::SeqCst) >= at_exhaustion + 10
    }) {
        println!("STUCK accepted={}", accepted.load(Ordering::SeqCst));
        return;
    }
    println!("RESUMED accepted={}", accepted.load(Ordering::SeqCst));
}

/// While out of descriptors the server's accept loop backs off (the child's CPU time stays
/// low) and reports the condition once; once descriptors are freed it accepts again.
#[test]
fn accept_backs_off_and_resumes() {
    // The child bounds each of its own waits; this bounds the whole exchange.
    with_deadline(PATIENCE * 4, accept_backs_off_and_resumes_body);
}

/// Kills the child when dropped, so that a failing test leaves no process behind.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn accept_backs_off_and_resumes_body() {
    let mut child = KillOnDrop(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "accept_exhaustion_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, "1")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let mut next = |prefix: &str| -> String {
        for line in lines.by_ref() {
            let line = line.unwrap();
            // The harness may print "test name ... " on the same line before our output.
            if let Some(i) = line.find(prefix).or_else(|| line.find("STUCK")) {
                return line[i..].to_string();
            }
        }
        panic!("the child ended before printing {prefix}");
    };
    let port: u16 = next("PORT ")[5..].trim().parse().unwrap();
    // More connections than the child has descriptors; the kernel completes the handshakes
    // (listen backlog) even while the child cannot accept them.
    let clients: Vec<std::net::TcpStream> = (0..80)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let exhausted = next("EXHAUSTED ");
    let field = |line: &str, key: &str| -> u64 {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(key))
            .unwrap()
            .parse()
            .unwrap()
    };
    let cpu_ms = field(&exhausted, "cpu_ms=");
    assert!(
        cpu_ms < 250,
        "the accept loop spun while out of descriptors: {exhausted}"
    );
    assert_eq!(
        field(&exhausted, "reports="),
        1,
        "reported once: {exhausted}"
    );
    // Free descriptors in the child: its handlers see EOF and drop their connections.
    let (closed, _kept) = clients.split_at(30);
    for c in closed {
        c.shutdown(std::net::Shutdown::Both).unwrap();
    }
    let resumed = next("RESUMED ");
    assert!(resumed.starts_with("RESUMED"), "{resumed}");
    assert!(child.0.wait().unwrap().success());
}
