//! Child processes (`eddy::process`): exit codes, kills, pipes fuller than a pipe buffer,
//! many children at once, and children nobody waits for (they must not stay zombies).

use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;

use eddy::process::{Command, Stdio};
use eddy::JoinSet;
use eddy_tests::{run, wait_until, PATIENCE};
use futures_lite::{AsyncReadExt, AsyncWriteExt};

/// The state letter of `/proc/<pid>/stat` (`R`, `S`, `Z` for a zombie, ...), or `None` once
/// the process is gone (reaped).
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state follows the command name, which is in parentheses and may hold spaces.
    stat.rsplit_once(") ")?.1.chars().next()
}

#[test]
fn exit_codes_come_back() {
    let codes = run(async {
        let mut codes = Vec::new();
        for script in ["exit 0", "exit 3", "exit 255"] {
            let status = Command::new("sh")
                .args(["-c", script])
                .status()
                .await
                .unwrap();
            codes.push(status.code());
        }
        codes
    });
    assert_eq!(codes, [Some(0), Some(3), Some(255)]);
}

#[test]
fn a_killed_child_reports_its_signal() {
    let (signal, id_after) = run(async {
        let mut child = Command::new("sleep").arg("600").spawn().unwrap();
        assert!(child.id().is_some());
        assert_eq!(child.try_wait().unwrap(), None);
        child.kill().await.unwrap();
        let status = child.wait().await.unwrap();
        (status.signal(), child.id())
    });
    assert_eq!(signal, Some(libc::SIGKILL));
    assert_eq!(id_after, None, "a reaped child has no id");
}

#[test]
fn output_reads_both_pipes_at_once() {
    // Each stream gets more than a pipe holds, stdout first: a reader that waits for the end
    // of stdout before reading stderr deadlocks (the child blocks on stderr and never
    // closes stdout).
    let out = run(async {
        Command::new("sh")
            .args([
                "-c",
                "head -c 300000 /dev/zero; head -c 200000 /dev/zero | tr '\\0' e >&2",
            ])
            .output()
            .await
            .unwrap()
    });
    assert!(out.status.success());
    assert_eq!(out.stdout.len(), 300_000);
    assert!(out.stdout.iter().all(|&b| b == 0));
    assert_eq!(out.stderr.len(), 200_000);
    assert!(out.stderr.iter().all(|&b| b == b'e'));
}

#[test]
fn piped_stdin_and_stdout_carry_a_megabyte_through_cat() {
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let expected = data.clone();
    let echoed = run(async move {
        let mut child = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = eddy::spawn(async move {
            stdin.write_all(&data).await.unwrap();
            stdin.close().await.unwrap();
            // Closed is closed: a later write is an error, not a hang.
            stdin.write_all(b"late").await.unwrap_err().kind()
        });
        let mut echoed = Vec::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_end(&mut echoed)
            .await
            .unwrap();
        assert_eq!(writer.await.unwrap(), ErrorKind::BrokenPipe);
        assert!(child.wait().await.unwrap().success());
        echoed
    });
    assert!(echoed == expected, "cat gave back other bytes");
}

#[test]
fn wait_closes_a_piped_stdin_so_the_child_can_finish() {
    let status = run(async {
        let mut child = Command::new("cat").stdin(Stdio::piped()).spawn().unwrap();
        child.wait().await.unwrap()
    });
    assert!(status.success());
}

#[test]
fn two_hundred_children_at_once() {
    let codes = run(async {
        let mut set = JoinSet::new();
        for i in 0..200u32 {
            set.spawn(async move {
                let script = format!("exit {}", i % 100);
                let status = Command::new("sh").args(["-c", &script]).status().await;
                (i, status.unwrap().code())
            });
        }
        let mut codes = Vec::new();
        while let Some(r) = set.join_next().await {
            codes.push(r.unwrap());
        }
        codes
    });
    assert_eq!(codes.len(), 200);
    for (i, code) in codes {
        assert_eq!(code, Some((i % 100) as i32), "child {i}");
    }
}

#[test]
fn a_missing_program_is_a_clear_error() {
    let kind = run(async {
        Command::new("/nonexistent/eddy-no-such-program")
            .spawn()
            .unwrap_err()
            .kind()
    });
    assert_eq!(kind, ErrorKind::NotFound);
}

#[test]
fn a_dropped_child_is_killed_on_request_and_reaped() {
    let pid = run(async {
        let child = Command::new("sleep")
            .arg("600")
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        child.id().unwrap()
    });
    assert!(
        wait_until(PATIENCE, || proc_state(pid).is_none()),
        "child {pid} is still there (state {:?})",
        proc_state(pid)
    );
}

#[test]
fn a_child_running_at_shutdown_runs_on_and_is_reaped_when_it_ends() {
    let rt = eddy_tests::rt(2);
    let (pid_tx, pid_rx) = std::sync::mpsc::channel();
    rt.block_on(async move {
        let mut child = Command::new("sleep").arg("600").spawn().unwrap();
        pid_tx.send(child.id().unwrap()).unwrap();
        // This task still waits when the runtime shuts down.
        let _waiting = eddy::spawn(async move {
            let _ = child.wait().await;
        });
    });
    let pid = pid_rx.recv().unwrap();
    eddy_tests::with_deadline(PATIENCE, move || drop(rt));
    let state = proc_state(pid);
    assert!(
        matches!(state, Some(s) if s != 'Z'),
        "without kill_on_drop the child runs on (state {state:?})"
    );
    // SAFETY: kill(2) has no memory-safety preconditions; `pid` is our unreaped child.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) }, 0);
    assert!(
        wait_until(PATIENCE, || proc_state(pid).is_none()),
        "child {pid} was not reaped (state {:?})",
        proc_state(pid)
    );
}

/// A child's stdout handed back as an fd feeds the next child's stdin (a pipeline): the fd
/// comes back in blocking mode, as a child's stdin is expected to be.
#[test]
fn a_childs_stdout_can_be_the_next_childs_stdin() {
    let out = run(async {
        let mut first = Command::new("sh")
            .args(["-c", "sleep 0.2; echo piped"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let fd = first.stdout.take().unwrap().into_owned_fd().unwrap();
        // SAFETY: fcntl(F_GETFL) on an fd we own has no memory-safety preconditions.
        let flags = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&fd), libc::F_GETFL) };
        assert_eq!(flags & libc::O_NONBLOCK, 0, "the fd is blocking again");
        let out = Command::new("tr")
            .args(["a-z", "A-Z"])
            .stdin(Stdio::from(fd))
            .output()
            .await
            .unwrap();
        assert!(first.wait().await.unwrap().success());
        out
    });
    assert!(out.status.success(), "{out:?}");
    assert_eq!(out.stdout, b"PIPED\n");
}
