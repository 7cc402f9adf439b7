//! The `guard` binary's global allocator: the first megabyte of allocations comes from a bump
//! arena, the rest from the C library's `malloc`.
//!
//! A run's start allocates some 360 KB in a few thousand small pieces (the built-in profiles
//! read into strings, layered, expanded, then mostly dropped) and frees most of them again
//! before the fork; `malloc` and `free` were a third of the instructions of `guard exec -- true`
//! (`callgrind`: 372k of 1.25M). From the arena an allocation is an addition and a free costs
//! nothing but for the last piece handed out, whose bytes the next allocation reuses (a
//! temporary dropped at once, a `Vec` or `String` grown in place while nothing else was
//! allocated); everything else stays where it is, so the arena fills once and from then on
//! every allocation goes to `malloc` (a long run's first few dozen judged calls fill the
//! rest). A free writes at most the arena's offset, which every allocation writes anyway: no
//! other page the sandbox's init still shares after the fork.
//!
//! Every page the arena hands out is a page fault when first written (1.3-1.5 µs each on
//! this project's current VM, where `guard exec -- true` made some 85 of them in the arena):
//! reusing the last piece kept 10 of them and 107 µs of a start (300 runs alternated).
//!
//! Only the binary installs it (`src/main.rs`): a program using guard as a library keeps its
//! own allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The arena's size in bytes.
pub const SIZE: usize = 1 << 20;

/// A bump arena of `N` bytes in front of the system allocator.
#[derive(Debug)]
pub struct Arena<const N: usize> {
    buf: Buf<N>,
    /// The offset of the first free byte.
    next: AtomicUsize,
}

#[repr(align(4096))]
#[derive(Debug)]
struct Buf<const N: usize>(UnsafeCell<[u8; N]>);

// SAFETY: the buffer is handed out in disjoint pieces (the offset moves by compare-and-swap),
// each owned by the allocation it was handed to.
unsafe impl<const N: usize> Sync for Arena<N> {}

impl<const N: usize> Arena<N> {
    /// An empty arena (a `static`'s initialiser).
    // No `Default`: a value of it is the size of its buffer, which belongs in a static.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Arena {
            buf: Buf(UnsafeCell::new([0; N])),
            next: AtomicUsize::new(0),
        }
    }

    fn base(&self) -> usize {
        self.buf.0.get() as usize
    }

    /// Whether `ptr` was handed out by the arena.
    fn holds(&self, ptr: *mut u8) -> bool {
        (self.base()..self.base() + N).contains(&(ptr as usize))
    }

    /// A piece of the arena for `layout`, or null when what is left is too small.
    fn bump(&self, layout: Layout) -> *mut u8 {
        let base = self.base();
        let mut next = self.next.load(Ordering::Relaxed);
        loop {
            // Aligned as an address (the buffer's own alignment covers most layouts).
            let start = (base + next).next_multiple_of(layout.align()) - base;
            let Some(end) = start.checked_add(layout.size()).filter(|&e| e <= N) else {
                return std::ptr::null_mut();
            };
            match self
                .next
                .compare_exchange_weak(next, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return (base + start) as *mut u8,
                Err(now) => next = now,
            }
        }
    }

    /// Frees the piece at `start` of `size` bytes when it is the last one handed out (a
    /// temporary dropped before anything else was allocated): the next allocation reuses its
    /// bytes. Any other piece stays where it is until the process ends.
    fn give_back(&self, start: usize, size: usize) {
        let _ =
            self.next
                .compare_exchange(start + size, start, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Grows the piece at `start` from `size` to `new_size` bytes in place, when it is the last
    /// one handed out and the arena has room (a `Vec` or `String` being filled while nothing
    /// else is allocated): no copy, and no second piece left behind.
    fn grow_last(&self, start: usize, size: usize, new_size: usize) -> bool {
        start + new_size <= N
            && self
                .next
                .compare_exchange(
                    start + size,
                    start + new_size,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// How many bytes of the arena have been handed out.
    #[cfg(test)]
    fn used(&self) -> usize {
        self.next.load(Ordering::Relaxed).min(N)
    }
}

// SAFETY: every pointer handed out is either a piece of the arena no other allocation
// overlaps, aligned and sized as asked, or the system allocator's; `dealloc` and `realloc`
// tell the two apart by address and give the system allocator back only its own.
//
// Not inlined: under LTO each method's body otherwise lands at every allocation site of the
// program (the text grew by 540 KB, 10%), where a call to it costs what a call to `malloc` did.
unsafe impl<const N: usize> GlobalAlloc for Arena<N> {
    #[inline(never)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = self.bump(layout);
        if ptr.is_null() {
            // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
            unsafe { System.alloc(layout) }
        } else {
            ptr
        }
    }

    #[inline(never)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !self.holds(ptr) {
            // SAFETY: not the arena's, so the system allocator's, with the layout it was
            // allocated with.
            unsafe { System.dealloc(ptr, layout) }
            return;
        }
        self.give_back(ptr as usize - self.base(), layout.size());
    }

    #[inline(never)]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !self.holds(ptr) {
            // SAFETY: the system allocator's pointer and layout, as the caller gave them.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        if new_size <= layout.size() {
            // Shrunk: the piece it has is large enough, and aligned the same.
            return ptr;
        }
        let start = ptr as usize - self.base();
        if self.grow_last(start, layout.size(), new_size) {
            return ptr;
        }
        // SAFETY: `realloc`'s caller guarantees the new size, rounded up to the alignment,
        // does not overflow, which is what `Layout` requires.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: a valid non-zero layout (new_size is non-zero by `realloc`'s contract).
        let moved = unsafe { self.alloc(new) };
        if !moved.is_null() {
            // SAFETY: both pieces are live and distinct; the old one holds `layout.size()`
            // bytes, the new one `new_size`.
            unsafe { std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size)) };
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::Arena;
    use std::alloc::{GlobalAlloc, Layout};

    #[test]
    fn pieces_are_aligned_disjoint_and_then_the_systems() {
        let arena = Box::new(Arena::<4096>::new());
        let small = Layout::from_size_align(10, 1).unwrap();
        let wide = Layout::from_size_align(64, 64).unwrap();
        // SAFETY: non-zero layouts; every pointer is written within its size and freed with
        // its layout.
        unsafe {
            let a = arena.alloc(small);
            let b = arena.alloc(wide);
            assert!(arena.holds(a) && arena.holds(b));
            assert_eq!(b as usize % 64, 0);
            assert!(b as usize >= a as usize + 10);
            std::ptr::write_bytes(a, 1, 10);
            std::ptr::write_bytes(b, 2, 64);
            // Shrunk in place; grown: a new piece with the old bytes.
            assert_eq!(arena.realloc(a, small, 4), a);
            let c = arena.realloc(a, small, 100);
            assert!(arena.holds(c) && c != a);
            assert_eq!(std::slice::from_raw_parts(c, 10), &[1u8; 10]);
            arena.dealloc(b, wide);
            // What does not fit any more is the system allocator's, and goes back to it.
            let big = Layout::from_size_align(8192, 8).unwrap();
            let d = arena.alloc(big);
            assert!(!d.is_null() && !arena.holds(d));
            std::ptr::write_bytes(d, 3, 8192);
            // Grown out of the arena: moved to the system allocator, bytes kept.
            let e = arena.realloc(c, Layout::from_size_align(100, 1).unwrap(), 5000);
            assert!(!e.is_null() && !arena.holds(e));
            assert_eq!(std::slice::from_raw_parts(e, 10), &[1u8; 10]);
            arena.dealloc(e, Layout::from_size_align(5000, 1).unwrap());
            arena.dealloc(d, big);
        }
        assert!(arena.used() <= 4096);
    }

    #[test]
    fn the_last_piece_is_reused_and_grown_in_place() {
        let arena = Box::new(Arena::<4096>::new());
        let l16 = Layout::from_size_align(16, 8).unwrap();
        // SAFETY: non-zero layouts; every pointer is written within its size and freed with
        // its layout.
        unsafe {
            let a = arena.alloc(l16);
            let b = arena.alloc(l16);
            // The last piece, freed: the next allocation gets its bytes.
            arena.dealloc(b, l16);
            assert_eq!(arena.used(), 32 - 16);
            let c = arena.alloc(l16);
            assert_eq!(c, b);
            // A piece that is not the last stays where it is.
            arena.dealloc(a, l16);
            assert_eq!(arena.used(), 32);
            // The last piece grows in place, its bytes kept, the arena used only as far as it
            // reaches; a piece behind it cannot.
            std::ptr::write_bytes(c, 7, 16);
            let grown = arena.realloc(c, l16, 100);
            assert_eq!(grown, c);
            assert_eq!(std::slice::from_raw_parts(grown, 16), &[7u8; 16]);
            assert_eq!(arena.used(), 16 + 100);
            let d = arena.alloc(l16);
            let l100 = Layout::from_size_align(100, 8).unwrap();
            let moved = arena.realloc(grown, l100, 200);
            assert!(moved != grown && arena.holds(moved));
            assert_eq!(std::slice::from_raw_parts(moved, 16), &[7u8; 16]);
            // Not beyond the arena's end: moved to the system allocator instead.
            let l200 = Layout::from_size_align(200, 8).unwrap();
            let out = arena.realloc(moved, l200, 8192);
            assert!(!out.is_null() && !arena.holds(out));
            assert_eq!(std::slice::from_raw_parts(out, 16), &[7u8; 16]);
            arena.dealloc(out, Layout::from_size_align(8192, 8).unwrap());
            arena.dealloc(d, l16);
        }
    }

    #[test]
    fn threads_get_disjoint_pieces() {
        static ARENA: Arena<65536> = Arena::new();
        let layout = Layout::from_size_align(16, 8).unwrap();
        let handed: Vec<Vec<usize>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        (0..500)
                            // SAFETY: a non-zero layout; the pieces are only counted, never
                            // freed.
                            .map(|_| unsafe { ARENA.alloc(layout) } as usize)
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let mut all: Vec<usize> = handed.into_iter().flatten().collect();
        all.sort_unstable();
        assert!(
            all.windows(2).all(|w| w[1] >= w[0] + 16),
            "overlapping pieces"
        );
    }
}
