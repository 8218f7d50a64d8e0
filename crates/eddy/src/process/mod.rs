//! Child processes: asyncio's `create_subprocess_exec`, under tokio's names.
//!
//! [`Command`] wraps [`std::process::Command`]; [`Command::spawn`] gives a [`Child`] whose
//! piped `stdin`, `stdout` and `stderr` are async streams (`futures-io`'s `AsyncWrite` and
//! `AsyncRead`) on a worker's reactor, and whose exit is awaited with [`Child::wait`].
//!
//! **How an exit is seen.** Each child gets a pidfd (`pidfd_open(2)`, Linux 5.3), which
//! becomes readable when the child exits; it sits in a worker's poller like any socket. So
//! there is no thread per child and no `SIGCHLD` handler: eddy never takes that signal from
//! other libraries in the process (a `SIGCHLD` handler is process-wide, and two libraries
//! that each install one break each other). Where `pidfd_open` is refused (an older kernel,
//! a seccomp filter) a child's exit is polled instead, with `try_wait` on a timer that backs
//! off from [`FIRST_POLL`] to [`LONGEST_POLL`].
//!
//! **Children nobody waits for.** Dropping a [`Child`] does not stop the process, unless
//! the command asked for [`kill_on_drop`](Command::kill_on_drop). Either way the child is
//! reaped once it exits, by one process-wide reaper thread that is started the first time
//! a running child is dropped. The reaper outlives runtimes, so a child still running when
//! its runtime shuts down (its task, and with it the `Child`, is dropped) leaves no zombie
//! behind when it ends.
//!
//! # Examples
//!
//! ```
//! use eddy::process::Command;
//!
//! let rt = eddy::Runtime::new()?;
//! let out = rt.block_on(async { Command::new("echo").arg("hello").output().await })?;
//! assert!(out.status.success());
//! assert_eq!(out.stdout, b"hello\n");
//! # Ok::<(), std::io::Error>(())
//! ```

mod exit;
mod pipe;
mod reaper;

use std::ffi::OsStr;
use std::fmt;
use std::future::poll_fn;
use std::io;
use std::path::Path;
use std::task::Poll;

pub use std::process::{ExitStatus, Output, Stdio};

pub use exit::{FIRST_POLL, LONGEST_POLL};
pub use pipe::{ChildStderr, ChildStdin, ChildStdout};

use exit::ExitWatch;

/// A process to start: [`std::process::Command`] with async [`spawn`](Command::spawn),
/// [`status`](Command::status) and [`output`](Command::output).
///
/// # Examples
///
/// ```
/// use eddy::process::Command;
///
/// let rt = eddy::Runtime::new()?;
/// let status = rt.block_on(async { Command::new("sh").args(["-c", "exit 3"]).status().await })?;
/// assert_eq!(status.code(), Some(3));
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Command {
    std: std::process::Command,
    kill_on_drop: bool,
    /// Which of stdin, stdout and stderr were set here: `output` fills in the others.
    stdio_set: [bool; 3],
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.std, f)
    }
}

impl From<std::process::Command> for Command {
    fn from(std: std::process::Command) -> Self {
        Command {
            std,
            kill_on_drop: false,
            stdio_set: [false; 3],
        }
    }
}

impl Command {
    /// A command to run `program`, as [`std::process::Command::new`].
    pub fn new(program: impl AsRef<OsStr>) -> Command {
        std::process::Command::new(program).into()
    }

    /// Adds an argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Command {
        self.std.arg(arg);
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.std.args(args);
        self
    }

    /// Sets an environment variable for the child.
    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Command {
        self.std.env(key, value);
        self
    }

    /// Sets environment variables for the child.
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Command
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.std.envs(vars);
        self
    }

    /// Removes an environment variable from the child's environment.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Command {
        self.std.env_remove(key);
        self
    }

    /// Starts the child with an empty environment (plus what `env` adds).
    pub fn env_clear(&mut self) -> &mut Command {
        self.std.env_clear();
        self
    }

    /// Sets the child's working directory.
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Command {
        self.std.current_dir(dir);
        self
    }

    /// The child's standard input (default: inherited; [`output`](Command::output): none).
    pub fn stdin(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.std.stdin(cfg);
        self.stdio_set[0] = true;
        self
    }

    /// The child's standard output (default: inherited; [`output`](Command::output):
    /// captured).
    pub fn stdout(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.std.stdout(cfg);
        self.stdio_set[1] = true;
        self
    }

    /// The child's standard error (default: inherited; [`output`](Command::output):
    /// captured).
    pub fn stderr(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.std.stderr(cfg);
        self.stdio_set[2] = true;
        self
    }

    /// Whether dropping the [`Child`] before it was waited for kills it with `SIGKILL`
    /// (default: no, the child runs on). It is reaped either way.
    pub fn kill_on_drop(&mut self, kill: bool) -> &mut Command {
        self.kill_on_drop = kill;
        self
    }

    /// The std command, to read.
    pub fn as_std(&self) -> &std::process::Command {
        &self.std
    }

    /// The std command, for settings this type does not forward (`uid`, `pre_exec`, ...).
    pub fn as_std_mut(&mut self) -> &mut std::process::Command {
        &mut self.std
    }

    /// Starts the child. Its piped streams and its exit are tied to the current runtime.
    ///
    /// # Errors
    ///
    /// The error of [`std::process::Command::spawn`] (the program was not found, ...), or
    /// an error outside an eddy runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy::process::{Command, Stdio};
    /// use futures_lite::{AsyncReadExt, AsyncWriteExt};
    ///
    /// let rt = eddy::Runtime::new()?;
    /// rt.block_on(async {
    ///     let mut child = Command::new("cat").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
    ///     let mut stdin = child.stdin.take().unwrap();
    ///     stdin.write_all(b"through cat").await?;
    ///     drop(stdin); // end of input: cat exits
    ///     let mut text = String::new();
    ///     child.stdout.take().unwrap().read_to_string(&mut text).await?;
    ///     assert_eq!(text, "through cat");
    ///     assert!(child.wait().await?.success());
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn(&mut self) -> io::Result<Child> {
        if crate::context::current_shared().is_none() {
            return Err(io::Error::other(
                "no eddy runtime on this thread: Command::spawn needs one",
            ));
        }
        let mut std = self.std.spawn()?;
        let pipes = (
            std.stdin.take().map(ChildStdin::new).transpose(),
            std.stdout.take().map(ChildStdout::new).transpose(),
            std.stderr.take().map(ChildStderr::new).transpose(),
        );
        let watch = ExitWatch::new(std.id());
        let mut child = Child {
            stdin: None,
            stdout: None,
            stderr: None,
            std: Some(std),
            status: None,
            watch,
            kill_on_drop: self.kill_on_drop,
        };
        match pipes {
            (Ok(stdin), Ok(stdout), Ok(stderr)) => {
                (child.stdin, child.stdout, child.stderr) = (stdin, stdout, stderr);
                Ok(child)
            }
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                // The caller gets no handle to this child: it must not run on. Dropped, it
                // is reaped.
                let _ = child.start_kill();
                Err(e)
            }
        }
    }

    /// Runs the child to its end and returns its exit status. Standard streams are
    /// inherited unless set.
    ///
    /// # Errors
    ///
    /// As [`spawn`](Command::spawn) and [`Child::wait`].
    pub async fn status(&mut self) -> io::Result<ExitStatus> {
        self.spawn()?.wait().await
    }

    /// Runs the child to its end and collects its exit status and everything it wrote.
    /// Unless set here, stdin is empty (`/dev/null`) and stdout and stderr are captured (the
    /// choice stays on this command, as with tokio). Both pipes are read at once, so a child
    /// that fills one of them while the other is being read does not deadlock.
    ///
    /// # Errors
    ///
    /// As [`spawn`](Command::spawn) and [`Child::wait`], and a read error on a pipe.
    pub async fn output(&mut self) -> io::Result<Output> {
        if !self.stdio_set[0] {
            self.stdin(Stdio::null());
        }
        if !self.stdio_set[1] {
            self.stdout(Stdio::piped());
        }
        if !self.stdio_set[2] {
            self.stderr(Stdio::piped());
        }
        self.spawn()?.wait_with_output().await
    }
}

/// A running (or finished) child process, from [`Command::spawn`].
///
/// Its piped streams are public fields to [`take`](Option::take). Dropping it leaves the
/// process running unless [`Command::kill_on_drop`] was set; see the [module
/// notes](self) for how it is reaped then.
pub struct Child {
    /// The child's stdin, when it was [`Stdio::piped`].
    pub stdin: Option<ChildStdin>,
    /// The child's stdout, when it was [`Stdio::piped`].
    pub stdout: Option<ChildStdout>,
    /// The child's stderr, when it was [`Stdio::piped`].
    pub stderr: Option<ChildStderr>,
    /// `None` only once the drop has handed it to the reaper.
    std: Option<std::process::Child>,
    /// Set once the exit was collected (the child is reaped).
    status: Option<ExitStatus>,
    watch: ExitWatch,
    kill_on_drop: bool,
}

impl fmt::Debug for Child {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Child")
            .field("pid", &self.std.as_ref().map(|c| c.id()))
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl Child {
    fn std(&mut self) -> &mut std::process::Child {
        self.std.as_mut().expect("the std child is kept until drop")
    }

    /// The process id, while the child has not been reaped (`None` after a
    /// [`wait`](Child::wait) returned: the id may belong to another process by then).
    pub fn id(&self) -> Option<u32> {
        match self.status {
            Some(_) => None,
            None => self.std.as_ref().map(|c| c.id()),
        }
    }

    /// The exit status if the child has exited (it is then reaped), without waiting.
    ///
    /// # Errors
    ///
    /// The `waitpid` error.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = self.std().try_wait()?;
        }
        Ok(self.status)
    }

    /// Waits for the child to exit and returns its status. Closes the child's stdin first
    /// (if piped and still here), so a child that reads to the end of its input can finish.
    /// Cancel-safe: dropping the future loses nothing, and a later call waits again.
    ///
    /// # Errors
    ///
    /// The `waitpid` error, or a reactor error on the pidfd.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        if let Some(status) = self.status {
            return Ok(status);
        }
        let std = self.std.as_mut().expect("the std child is kept until drop");
        let status = self.watch.wait(std).await?;
        self.status = Some(status);
        Ok(status)
    }

    /// Reads stdout and stderr (those piped and not taken) to their ends, both at once, and
    /// waits for the exit: what [`Command::output`] returns.
    ///
    /// # Errors
    ///
    /// As [`wait`](Child::wait), and a read error on a pipe.
    pub async fn wait_with_output(mut self) -> io::Result<Output> {
        drop(self.stdin.take());
        let (mut out, mut err) = (self.stdout.take(), self.stderr.take());
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        poll_fn(|cx| {
            let out_done = pipe::poll_drain(&mut out, &mut stdout, cx)?;
            let err_done = pipe::poll_drain(&mut err, &mut stderr, cx)?;
            match (out_done, err_done) {
                (Poll::Ready(()), Poll::Ready(())) => Poll::Ready(Ok::<(), io::Error>(())),
                _ => Poll::Pending,
            }
        })
        .await?;
        let status = self.wait().await?;
        Ok(Output {
            status,
            stdout,
            stderr,
        })
    }

    /// Sends `SIGKILL` without waiting for the child to die (a child already reaped is
    /// left alone).
    ///
    /// # Errors
    ///
    /// The `kill` error.
    pub fn start_kill(&mut self) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        self.std().kill()
    }

    /// Kills the child with `SIGKILL` and waits until it is gone.
    ///
    /// # Errors
    ///
    /// As [`start_kill`](Child::start_kill) and [`wait`](Child::wait).
    pub async fn kill(&mut self) -> io::Result<()> {
        self.start_kill()?;
        self.wait().await.map(drop)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        let Some(mut std) = self.std.take() else {
            return;
        };
        if let Ok(Some(_)) = std.try_wait() {
            return;
        }
        if self.kill_on_drop {
            let _ = std.kill();
        }
        reaper::adopt(std);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_outside_a_runtime_is_an_error() {
        let err = Command::new("true").spawn().unwrap_err();
        assert!(err.to_string().contains("no eddy runtime"), "{err}");
    }

    #[test]
    fn output_fills_in_only_the_streams_not_set() {
        let mut c = Command::new("true");
        c.stderr(Stdio::inherit());
        assert_eq!(c.stdio_set, [false, false, true]);
    }
}
