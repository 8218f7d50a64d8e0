//! Live allocations by call site, for the soak: which code holds the bytes that grow. Off
//! unless a binary that installed [`crate::counting::Counting`] calls [`track_from`]; then
//! every allocation of at least that many bytes records its stack (unresolved, a few
//! microseconds), and its free forgets it. [`LiveSites::now`] groups what is still live by
//! stack; [`LiveSites::report_growth`] resolves the stacks that grew and prints them.
//!
//! The tracker's own allocations (its tables, the captured stacks) are made with a
//! thread-local guard set, so they are neither tracked nor recursive.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The smallest allocation tracked; `usize::MAX` (the start) tracks nothing.
static TRACK_FROM: AtomicUsize = AtomicUsize::new(usize::MAX);

thread_local! {
    /// Set while this thread is inside the tracker: its allocations are not tracked.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

#[derive(Default)]
struct Table {
    /// Live tracked allocations: address -> (size, stack id).
    live: HashMap<usize, (usize, u64)>,
    /// Stack id -> the stack's instruction pointers.
    stacks: HashMap<u64, Vec<usize>>,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

/// Tracks every allocation of `min_size` bytes or more from now on.
pub fn track_from(min_size: usize) {
    TRACK_FROM.store(min_size.max(1), Ordering::SeqCst);
}

/// Runs `f` with the guard set, unless this thread is already inside the tracker (or its
/// thread-local is gone, at thread exit).
fn guarded(f: impl FnOnce()) {
    let entered = INSIDE
        .try_with(|inside| !inside.replace(true))
        .unwrap_or(false);
    if entered {
        f();
        let _ = INSIDE.try_with(|inside| inside.set(false));
    }
}

pub(crate) fn on_alloc(ptr: *mut u8, size: usize) {
    if size < TRACK_FROM.load(Ordering::Relaxed) {
        return;
    }
    guarded(|| {
        let mut ips = Vec::with_capacity(32);
        backtrace::trace(|frame| {
            ips.push(frame.ip() as usize);
            ips.len() < 48
        });
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        ips.hash(&mut hasher);
        let id = hasher.finish();
        let mut table = TABLE.lock().unwrap_or_else(|e| e.into_inner());
        let table = table.get_or_insert_with(Table::default);
        table.stacks.entry(id).or_insert(ips);
        table.live.insert(ptr as usize, (size, id));
    });
}

pub(crate) fn on_dealloc(ptr: *mut u8, size: usize) {
    if size < TRACK_FROM.load(Ordering::Relaxed) {
        return;
    }
    guarded(|| {
        let mut table = TABLE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(table) = table.as_mut() {
            table.live.remove(&(ptr as usize));
        }
    });
}

/// Live tracked bytes and allocations per stack, at one moment.
#[derive(Debug, Clone, Default)]
pub struct LiveSites {
    by_stack: HashMap<u64, (usize, usize)>,
}

impl LiveSites {
    /// What is live now.
    pub fn now() -> Self {
        let mut by_stack: HashMap<u64, (usize, usize)> = HashMap::new();
        guarded(|| {
            let table = TABLE.lock().unwrap_or_else(|e| e.into_inner());
            for &(size, id) in table.iter().flat_map(|t| t.live.values()) {
                let e = by_stack.entry(id).or_default();
                e.0 += 1;
                e.1 += size;
            }
        });
        LiveSites { by_stack }
    }

    /// Prints the `n` stacks whose live bytes grew most since `earlier`, resolved, from the
    /// first frame past the allocator.
    pub fn report_growth(&self, earlier: &LiveSites, n: usize) {
        let mut grown: Vec<(u64, isize, isize)> = self
            .by_stack
            .iter()
            .map(|(&id, &(count, bytes))| {
                let (c0, b0) = earlier.by_stack.get(&id).copied().unwrap_or_default();
                (
                    id,
                    count as isize - c0 as isize,
                    bytes as isize - b0 as isize,
                )
            })
            .filter(|&(_, _, bytes)| bytes > 0)
            .collect();
        grown.sort_by_key(|&(_, _, bytes)| std::cmp::Reverse(bytes));
        grown.truncate(n);
        guarded(|| {
            let table = TABLE.lock().unwrap_or_else(|e| e.into_inner());
            let Some(table) = table.as_ref() else { return };
            for (id, count, bytes) in grown {
                println!("call site: {count:+} allocations, {bytes:+} bytes live");
                let ips = &table.stacks[&id];
                let mut frames = Vec::new();
                for &ip in ips {
                    backtrace::resolve(ip as *mut std::ffi::c_void, |symbol| {
                        if let Some(name) = symbol.name() {
                            frames.push(format!("{name:#}"));
                        }
                    });
                }
                // From the first frame past the allocator: the code that asked for memory.
                let shown: Vec<_> = frames
                    .iter()
                    .skip_while(|f| !is_allocator_frame(f))
                    .skip_while(|f| is_allocator_frame(f))
                    .take(10)
                    .collect();
                for f in shown {
                    println!("    {f}");
                }
            }
        });
    }
}

/// Frames of the tracker, the counting allocator and the standard library's allocation
/// functions, which every stack starts with.
fn is_allocator_frame(frame: &str) -> bool {
    [
        "call_sites",
        "counting",
        "alloc::alloc",
        "__rust",
        "backtrace",
        "raw_vec",
        "RawVec",
    ]
    .iter()
    .any(|part| frame.contains(part))
}
