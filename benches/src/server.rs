//! Servers in child processes, for the network benchmarks (`echo`, `mixed`): the binary
//! starts itself with `--serve NAME ...`, the child announces its address on stdout, and the
//! parent drives the load, so that each runtime has a process (and a kernel view of CPU
//! time) of its own.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

/// A server child process.
#[derive(Debug)]
pub struct Server {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl Server {
    /// Starts this binary again with `args` (which must make it call [`announce`]) and waits
    /// for the address it listens on.
    pub fn start(args: &[&str]) -> io::Result<Server> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(args)
            .stdout(Stdio::piped())
            .stdin(Stdio::piped())
            .spawn()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
        let addr = line
            .trim()
            .strip_prefix("LISTENING ")
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| io::Error::other(format!("server {args:?} said {line:?}")))?;
        Ok(Server { child, addr })
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the child and waits for it.
    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// In the child: tells the parent where it listens.
pub fn announce(addr: SocketAddr) {
    println!("LISTENING {addr}");
    let _ = io::stdout().flush();
}

/// In the child: exits when the parent goes away (its end of our stdin closes), so that no
/// server outlives an interrupted benchmark.
pub fn exit_with_parent() {
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = io::stdin().read_to_end(&mut sink);
        std::process::exit(0);
    });
}

/// utime + stime of a process, in clock ticks.
pub fn cpu_ticks(pid: u32) -> io::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which is in parentheses and may contain spaces).
    let rest = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f[11].parse().map_err(io::Error::other)?;
    let stime: u64 = f[12].parse().map_err(io::Error::other)?;
    Ok(utime + stime)
}

/// Clock ticks per second (the unit of [`cpu_ticks`]).
pub fn clock_ticks_per_sec() -> i64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }
}

/// The smol server setup of every network benchmark: one `async_executor::Executor` run by
/// `threads` threads, each in `async_io::block_on(executor.run(..))`, so that idle threads
/// drive the async-io reactor.
pub fn smol_executor(threads: usize) -> std::sync::Arc<async_executor::Executor<'static>> {
    let ex = std::sync::Arc::new(async_executor::Executor::new());
    for _ in 0..threads {
        let ex = ex.clone();
        std::thread::spawn(move || {
            async_io::block_on(ex.run(futures_lite::future::pending::<()>()))
        });
    }
    ex
}

/// Asks Linux for scheduler time slices of `slice` on the calling thread, and so on every
/// thread it starts afterwards (they inherit it): what eddy's `Builder::worker_time_slice`
/// does for its own threads, for giving tokio's and smol's servers the same
/// (`mixed --slice all`). Policy `SCHED_OTHER`, nice 0, as a benchmark server runs.
pub fn request_time_slice(slice: std::time::Duration) -> io::Result<()> {
    /// `struct sched_attr`, first version (48 bytes).
    #[repr(C)]
    #[derive(Default)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
    }
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        runtime: slice.as_nanos() as u64,
        ..SchedAttr::default()
    };
    // SAFETY: the kernel reads `attr.size` bytes from a valid `SchedAttr` that outlives the
    // call; pid 0 is the calling thread.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0u32) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
