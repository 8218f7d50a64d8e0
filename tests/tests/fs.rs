//! Files on the blocking pool (`eddy::fs`): one-shot functions, a `File` larger than its
//! buffer, small reads served from the buffer, positions across reads, writes and seeks,
//! concurrent readers, and errors.

use std::io::{ErrorKind, SeekFrom};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use eddy::fs::{File, BUFFER_SIZE};
use eddy_tests::{block_on_within, run, wait_until, PATIENCE};
use futures_lite::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

/// A fresh directory for one test, removed when the guard drops.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("eddy-fs-test-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `len` bytes that differ from one offset to the next (a misplaced chunk shows).
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i / 251) as u8)
        .collect()
}

#[test]
fn one_shot_functions_round_trip() {
    let dir = TempDir::new();
    let (a, b) = (dir.file("a.txt"), dir.file("b.txt"));
    let (text, len, missing) = run(async move {
        eddy::fs::write(&a, "first line\n").await.unwrap();
        eddy::fs::rename(&a, &b).await.unwrap();
        let text = eddy::fs::read_to_string(&b).await.unwrap();
        let len = eddy::fs::metadata(&b).await.unwrap().len();
        eddy::fs::remove_file(&b).await.unwrap();
        let missing = eddy::fs::read(&b).await.unwrap_err().kind();
        (text, len, missing)
    });
    assert_eq!(text, "first line\n");
    assert_eq!(len, 11);
    assert_eq!(missing, ErrorKind::NotFound);
}

#[test]
fn a_file_larger_than_the_buffer_written_and_read_in_small_pieces() {
    let dir = TempDir::new();
    let path = dir.file("big");
    let data = pattern(3 * BUFFER_SIZE + 12_345);
    let expected = data.clone();
    let (read_back, on_disk) = run(async move {
        let mut file = File::create(&path).await.unwrap();
        for piece in data.chunks(1000) {
            file.write_all(piece).await.unwrap();
        }
        file.flush().await.unwrap();
        let on_disk = std::fs::read(&path).unwrap();
        let mut file = File::open(&path).await.unwrap();
        let mut read_back = Vec::new();
        let mut piece = [0u8; 777];
        loop {
            let n = file.read(&mut piece).await.unwrap();
            if n == 0 {
                break;
            }
            read_back.extend_from_slice(&piece[..n]);
        }
        (read_back, on_disk)
    });
    assert!(on_disk == expected, "the file on disk differs");
    assert!(read_back == expected, "the bytes read back differ");
}

/// Small reads within the buffer need no pool trip: with the pool's only thread held by
/// the test, they still complete.
#[test]
fn small_reads_are_served_from_the_buffer() {
    let dir = TempDir::new();
    let path = dir.file("small-reads");
    std::fs::write(&path, pattern(BUFFER_SIZE)).unwrap();
    let read = block_on_within(one_pool_thread(), PATIENCE, async move {
        let mut file = File::open(&path).await.unwrap();
        let mut first = [0u8; 1];
        file.read_exact(&mut first).await.unwrap(); // fills the buffer
        let (release, blocker) = hold_the_pool();
        let mut rest = vec![0u8; BUFFER_SIZE - 1];
        for byte in rest.chunks_mut(10) {
            file.read_exact(byte).await.unwrap();
        }
        drop(release);
        blocker.await.unwrap();
        let mut all = first.to_vec();
        all.extend_from_slice(&rest);
        all
    });
    assert!(read == pattern(BUFFER_SIZE));
}

#[test]
fn positions_follow_reads_writes_and_seeks_as_with_a_std_file() {
    let dir = TempDir::new();
    let path = dir.file("positions");
    let (word, pos_after_read, content) = run(async move {
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).create(true).truncate(true);
        let mut file = File::open_with(&path, &options).await.unwrap();
        file.write_all(b"hello world").await.unwrap();
        // A seek makes the buffered writes first.
        assert_eq!(file.seek(SeekFrom::Start(6)).await.unwrap(), 6);
        let mut word = [0u8; 3];
        file.read_exact(&mut word).await.unwrap();
        // The read-ahead holds "ld"; the position is after "wor".
        let pos_after_read = file.seek(SeekFrom::Current(0)).await.unwrap();
        file.read_exact(&mut [0u8; 1]).await.unwrap();
        // A write after a read lands where the reading stopped, not after the read-ahead.
        file.write_all(b"LD!").await.unwrap();
        file.flush().await.unwrap();
        (word, pos_after_read, std::fs::read(&path).unwrap())
    });
    assert_eq!(&word, b"wor");
    assert_eq!(pos_after_read, 9);
    assert_eq!(content, b"hello worlLD!");
}

#[test]
fn concurrent_readers_each_read_the_whole_file() {
    let dir = TempDir::new();
    let path = dir.file("shared");
    let data = pattern(2 * BUFFER_SIZE + 99);
    std::fs::write(&path, &data).unwrap();
    let reads = run(async move {
        let readers: Vec<_> = (0..8)
            .map(|_| {
                let path = path.clone();
                eddy::spawn(async move {
                    let mut file = File::open(&path).await.unwrap();
                    let mut all = Vec::new();
                    file.read_to_end(&mut all).await.unwrap();
                    all
                })
            })
            .collect();
        let mut reads = Vec::new();
        for r in readers {
            reads.push(r.await.unwrap());
        }
        reads
    });
    assert_eq!(reads.len(), 8);
    for (i, r) in reads.iter().enumerate() {
        assert!(*r == data, "reader {i} read other bytes");
    }
}

#[test]
fn a_write_to_a_read_only_file_is_an_error_from_flush() {
    let dir = TempDir::new();
    let path = dir.file("read-only");
    std::fs::write(&path, b"x").unwrap();
    let errno = run(async move {
        let mut file = File::open(&path).await.unwrap();
        // Buffered: the error comes when the writes are made.
        file.write_all(b"nope").await.unwrap();
        file.flush().await.unwrap_err().raw_os_error()
    });
    // The descriptor is not open for writing.
    assert_eq!(errno, Some(libc::EBADF));
}

#[test]
fn buffered_writes_are_made_when_the_file_is_dropped() {
    let dir = TempDir::new();
    let path = dir.file("dropped");
    let watched = path.clone();
    run(async move {
        let mut file = File::create(&path).await.unwrap();
        file.write_all(b"kept").await.unwrap();
    });
    assert!(
        wait_until(PATIENCE, || std::fs::read(&watched)
            .is_ok_and(|c| c == b"kept")),
        "the buffered write was lost"
    );
}

/// The pool's only thread, held by the test until the returned sender is dropped or sent to.
fn hold_the_pool() -> (std::sync::mpsc::Sender<()>, eddy::Task<()>) {
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (started_tx, started) = std::sync::mpsc::channel::<()>();
    let blocker = eddy::spawn_blocking(move || {
        started_tx.send(()).unwrap();
        let _ = held.recv();
    });
    started.recv_timeout(PATIENCE).unwrap();
    (release, blocker)
}

fn one_pool_thread() -> eddy::Runtime {
    eddy::Builder::new()
        .workers(2)
        .max_blocking_threads(1)
        .build()
        .unwrap()
}

/// A seek whose future is dropped before its job ran does not answer the next seek: that
/// one seeks again, to where it asks.
#[test]
fn a_seek_after_a_cancelled_seek_goes_where_it_asks() {
    let dir = TempDir::new();
    let path = dir.file("seeks");
    std::fs::write(&path, pattern(1000)).unwrap();
    let byte = block_on_within(one_pool_thread(), PATIENCE, async move {
        let mut file = File::open(&path).await.unwrap();
        let (release, blocker) = hold_the_pool();
        let first = futures_lite::future::poll_once(file.seek(SeekFrom::Start(100))).await;
        assert!(first.is_none(), "the seek waits for the held pool");
        drop(release);
        blocker.await.unwrap();
        assert_eq!(file.seek(SeekFrom::Start(0)).await.unwrap(), 0);
        let mut byte = [0u8];
        file.read_exact(&mut byte).await.unwrap();
        byte[0]
    });
    assert_eq!(byte, pattern(1)[0]);
}

/// Bytes a write reported written stay written when the operation that was making them is
/// cancelled, the file dropped and the runtime shut down before the pool ran the job.
#[test]
fn writes_left_in_a_cancelled_job_are_made_at_shutdown() {
    let dir = TempDir::new();
    let path = dir.file("cancelled-write");
    let data = pattern(BUFFER_SIZE + 10);
    let expected = data.clone();
    let watched = path.clone();
    let rt = one_pool_thread();
    let release = block_on_within(rt, PATIENCE, async move {
        let mut file = File::create(&path).await.unwrap();
        let (release, _blocker) = hold_the_pool();
        // The first BUFFER_SIZE bytes are buffered and reported written; the rest waits
        // for a write job, which waits for the held pool.
        let write = futures_lite::future::poll_once(file.write_all(&data)).await;
        assert!(write.is_none());
        drop(file);
        release
    });
    // `block_on_within` dropped the runtime: the queued job was cancelled unrun.
    let on_disk = std::fs::read(&watched).unwrap();
    drop(release);
    assert!(
        on_disk == expected[..BUFFER_SIZE],
        "{} bytes on disk, {BUFFER_SIZE} were reported written",
        on_disk.len()
    );
}
