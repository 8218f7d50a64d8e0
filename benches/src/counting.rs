//! The system allocator, counting: a global allocator for the binaries that measure memory
//! (`memory`, `soak`). The lib only defines it; a binary installs it with
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: eddy_benches::counting::Counting = eddy_benches::counting::Counting;
//! ```
//!
//! The timing benches do not: the counters would distort them.
//!
//! Built with the `mimalloc` feature it counts in front of mimalloc instead of the system
//! allocator (glibc's malloc): an allocator that gives freed pages back to the kernel, so
//! that the resident set follows what the program holds (see `soak`).

#[cfg(not(feature = "mimalloc"))]
use std::alloc::System as Inner;
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

#[cfg(feature = "mimalloc")]
use mimalloc::MiMalloc as Inner;

/// The allocator behind the counters.
const INNER: Inner = Inner;

/// The system allocator (or mimalloc, see the module notes), counting live bytes, bytes
/// allocated, allocations and their sizes.
#[derive(Debug)]
pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
/// Allocations by exact size (the last bucket holds every size >= `SIZE_BUCKETS - 1`).
pub const SIZE_BUCKETS: usize = 1025;
static BY_SIZE: [AtomicUsize; SIZE_BUCKETS] = [const { AtomicUsize::new(0) }; SIZE_BUCKETS];

/// Size classes of the live counts: one per exact size below [`EXACT_CLASSES`], then one per
/// power of two (class `EXACT_CLASSES + k` holds sizes in `[2^(10+k), 2^(11+k))`).
pub const EXACT_CLASSES: usize = 1024;
/// Number of live size classes: the exact ones, then 54 powers of two (up to 2^64).
pub const LIVE_CLASSES: usize = EXACT_CLASSES + 54;
static LIVE_BY_CLASS: [AtomicIsize; LIVE_CLASSES] = [const { AtomicIsize::new(0) }; LIVE_CLASSES];
static LIVE_BYTES_BY_CLASS: [AtomicIsize; LIVE_CLASSES] =
    [const { AtomicIsize::new(0) }; LIVE_CLASSES];

/// The live size class of an allocation of `size` bytes.
pub fn size_class(size: usize) -> usize {
    if size < EXACT_CLASSES {
        size
    } else {
        EXACT_CLASSES + (size.ilog2() as usize - EXACT_CLASSES.ilog2() as usize)
    }
}

/// The smallest size in live class `class` (see [`size_class`]).
pub fn class_floor(class: usize) -> usize {
    if class < EXACT_CLASSES {
        class
    } else {
        EXACT_CLASSES << (class - EXACT_CLASSES)
    }
}

#[inline]
fn live_change(size: usize, sign: isize) {
    let class = size_class(size);
    LIVE_BY_CLASS[class].fetch_add(sign, Ordering::Relaxed);
    LIVE_BYTES_BY_CLASS[class].fetch_add(sign * size as isize, Ordering::Relaxed);
}

#[inline]
fn count(size: usize) {
    LIVE.fetch_add(size as isize, Ordering::Relaxed);
    ALLOCATED.fetch_add(size, Ordering::Relaxed);
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    BY_SIZE[size.min(SIZE_BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
    live_change(size, 1);
}

// SAFETY: every method forwards to `INNER` (the system allocator or mimalloc) with the
// caller's arguments unchanged, so this allocator upholds exactly the contract `INNER` does;
// the counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::alloc`'s contract.
        let p = unsafe { INNER.alloc(layout) };
        if !p.is_null() {
            count(layout.size());
            crate::call_sites::on_alloc(p, layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        let p = unsafe { INNER.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size());
            crate::call_sites::on_alloc(p, layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Before the free: once freed, the address may be handed to another thread.
        crate::call_sites::on_dealloc(ptr, layout.size());
        // SAFETY: `ptr` was allocated by `INNER` (through us) with `layout`, as the caller
        // guarantees, so forwarding unchanged is sound.
        unsafe { INNER.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        live_change(layout.size(), -1);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        crate::call_sites::on_dealloc(ptr, layout.size());
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::realloc`'s contract.
        let p = unsafe { INNER.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            crate::call_sites::on_alloc(p, new_size);
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
            ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
            live_change(layout.size(), -1);
            live_change(new_size, 1);
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

/// Live allocations and their bytes per size class (see [`size_class`]), at one moment.
#[derive(Debug, Clone)]
pub struct LiveByClass {
    /// Allocations of each class not yet freed.
    pub count: Vec<isize>,
    /// Their bytes.
    pub bytes: Vec<isize>,
}

impl LiveByClass {
    /// The counters now.
    pub fn now() -> Self {
        Self {
            count: LIVE_BY_CLASS
                .iter()
                .map(|c| c.load(Ordering::SeqCst))
                .collect(),
            bytes: LIVE_BYTES_BY_CLASS
                .iter()
                .map(|c| c.load(Ordering::SeqCst))
                .collect(),
        }
    }

    /// The classes whose live bytes grew most from `earlier` to `self`, largest growth first:
    /// `(class floor, count change, bytes change)`, at most `n` of them, growing ones only.
    pub fn grown_since(&self, earlier: &Self, n: usize) -> Vec<(usize, isize, isize)> {
        let mut grown: Vec<_> = (0..LIVE_CLASSES)
            .map(|c| {
                (
                    class_floor(c),
                    self.count[c] - earlier.count[c],
                    self.bytes[c] - earlier.bytes[c],
                )
            })
            .filter(|&(_, _, bytes)| bytes > 0)
            .collect();
        grown.sort_by_key(|&(_, _, bytes)| std::cmp::Reverse(bytes));
        grown.truncate(n);
        grown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_are_exact_below_1024_then_powers_of_two() {
        assert_eq!(size_class(0), 0);
        assert_eq!(size_class(1023), 1023);
        assert_eq!(size_class(1024), EXACT_CLASSES);
        assert_eq!(size_class(2047), EXACT_CLASSES);
        assert_eq!(size_class(2048), EXACT_CLASSES + 1);
        assert_eq!(size_class(usize::MAX), LIVE_CLASSES - 1);
        assert_eq!(class_floor(size_class(4096)), 4096);
        assert_eq!(class_floor(size_class(5000)), 4096);
        assert_eq!(class_floor(77), 77);
    }
}
