//! Heap accounting for the memory figures: a global allocator that counts, per
//! thread, the allocations and bytes that pass through it.
//!
//! The binary installs [`CountingAllocator`] (see `main.rs`; the library's own
//! tests install it too), so a worker can report the heap a keyed cipher owns
//! and prove that its measured loop allocates nothing. Counters are
//! thread-local, so one thread's count is not disturbed by another's work,
//! and cost a few adds per allocation and nothing when nothing allocates.
//! Where the allocator is not installed (a bench binary embedding the
//! engine), [`is_counting`] says so and the engine reports no heap figures
//! rather than zeros.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// A [`System`] allocator that counts what each thread allocates and frees.
pub struct CountingAllocator;

/// What one thread has allocated so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Allocations (a `realloc` counts as one).
    pub allocations: u64,
    /// Bytes handed out, over all allocations.
    pub allocated_bytes: u64,
    /// Bytes given back.
    pub freed_bytes: u64,
}

impl Counts {
    /// What happened between `earlier` and `self`.
    pub fn since(self, earlier: Counts) -> Counts {
        Counts {
            allocations: self.allocations - earlier.allocations,
            allocated_bytes: self.allocated_bytes - earlier.allocated_bytes,
            freed_bytes: self.freed_bytes - earlier.freed_bytes,
        }
    }

    /// Bytes still held out of what was allocated (allocated minus freed).
    pub fn held_bytes(self) -> u64 {
        self.allocated_bytes.saturating_sub(self.freed_bytes)
    }
}

thread_local! {
    // Const-initialised and without a destructor, so the allocator may touch it
    // at any point of a thread's life, including while TLS is torn down.
    static COUNTS: Cell<Counts> = const {
        Cell::new(Counts {
            allocations: 0,
            allocated_bytes: 0,
            freed_bytes: 0,
        })
    };
}

fn note(allocated: u64, freed: u64) {
    let _ = COUNTS.try_with(|c| {
        let mut n = c.get();
        n.allocations += u64::from(allocated > 0);
        n.allocated_bytes += allocated;
        n.freed_bytes += freed;
        c.set(n);
    });
}

// SAFETY: every method forwards to `System` with the caller's arguments and
// only adds bookkeeping in thread-local cells; it never allocates itself.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed on unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            note(layout.size() as u64, 0);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            note(layout.size() as u64, 0);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator (so from `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        note(0, layout.size() as u64);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`, and `new_size` is the caller's valid new size.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            note(new_size as u64, layout.size() as u64);
        }
        p
    }
}

/// This thread's counts so far.
pub fn counts() -> Counts {
    COUNTS.try_with(Cell::get).unwrap_or_default()
}

/// Whether the process runs on [`CountingAllocator`]: a fresh allocation
/// moves this thread's count.
pub fn is_counting() -> bool {
    let before = counts();
    drop(std::hint::black_box(Box::new(std::hint::black_box(0u64))));
    counts().allocations > before.allocations
}

/// Runs `make` and returns its value with the heap bytes it still holds
/// afterwards: what a constructed object owns on the heap (when counting).
pub fn owned_by<T>(make: impl FnOnce() -> T) -> (T, u64) {
    let before = counts();
    let value = make();
    let held = counts().since(before).held_bytes();
    (value, held)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_binary_counts_allocations() {
        assert!(is_counting(), "lib.rs installs the allocator for tests");
    }

    #[test]
    fn owned_heap_is_what_stays_allocated() {
        let (v, held) = owned_by(|| {
            let scratch = vec![0u8; 4096];
            drop(std::hint::black_box(scratch));
            vec![1u8; 1000]
        });
        assert_eq!(held, 1000, "the scratch buffer was freed, the vector kept");
        assert_eq!(v.len(), 1000);
        let (_, none) = owned_by(|| [0u8; 64]);
        assert_eq!(none, 0);
    }

    #[test]
    fn counts_are_per_thread() {
        let before = counts();
        std::thread::spawn(|| drop(std::hint::black_box(vec![0u8; 1 << 20])))
            .join()
            .unwrap();
        // Spawning itself may allocate here; the megabyte was another thread's.
        assert!(counts().since(before).allocated_bytes < 1 << 20);
    }
}
