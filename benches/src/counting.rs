//! The system allocator, counting: a global allocator for the binaries that measure memory
//! (`memory`, `soak`). The lib only defines it; a binary installs it with
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: eddy_benches::counting::Counting = eddy_benches::counting::Counting;
//! ```
//!
//! The timing benches do not: the counters would distort them.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

/// The system allocator, counting live bytes, bytes allocated, allocations and their sizes.
#[derive(Debug)]
pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
/// Allocations by exact size (the last bucket holds every size >= `SIZE_BUCKETS - 1`).
pub const SIZE_BUCKETS: usize = 1025;
static BY_SIZE: [AtomicUsize; SIZE_BUCKETS] = [const { AtomicUsize::new(0) }; SIZE_BUCKETS];

#[inline]
fn count(size: usize) {
    LIVE.fetch_add(size as isize, Ordering::Relaxed);
    ALLOCATED.fetch_add(size, Ordering::Relaxed);
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    BY_SIZE[size.min(SIZE_BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so this
// allocator upholds exactly the contract `System` does; the counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // `ptr` was allocated by `System` (through us) with `layout`, as the caller guarantees.
        // SAFETY: so forwarding unchanged is sound.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::realloc`'s contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
            ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        p
    }
}

/// The counters at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Bytes allocated and not yet freed (through this allocator, since the process started).
    pub live: isize,
    /// Bytes allocated in all, freed or not.
    pub allocated: usize,
    /// Allocations made (reallocations count as one).
    pub allocations: usize,
    /// Allocations by size, see [`SIZE_BUCKETS`].
    pub by_size: Vec<usize>,
}

/// The counters now. All zero unless the binary installed [`Counting`].
pub fn snapshot() -> Snapshot {
    Snapshot {
        live: LIVE.load(Ordering::SeqCst),
        allocated: ALLOCATED.load(Ordering::SeqCst),
        allocations: ALLOCATIONS.load(Ordering::SeqCst),
        by_size: BY_SIZE.iter().map(|c| c.load(Ordering::SeqCst)).collect(),
    }
}

/// Bytes allocated and not yet freed, without copying the size buckets.
pub fn live_bytes() -> isize {
    LIVE.load(Ordering::SeqCst)
}
