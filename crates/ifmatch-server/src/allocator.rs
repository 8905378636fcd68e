//! The binary's allocator: mimalloc, asked the way its fast paths expect.
//!
//! The `mimalloc` crate's `GlobalAlloc` passes every request to `mi_malloc_aligned`, alignment
//! 1 and 8 included. In mimalloc 3 that call takes its fast path only for blocks of 1 KiB or
//! less; a larger block whose size class is not a power of two (a 4 KiB body with its head, a
//! connection's read buffer) goes to the over-allocating path, about 300 instructions more
//! than `mi_malloc`, and its block is flagged as holding an interior pointer, which slows its
//! free. A stored miss of the proxy made nine such calls (callgrind, `scripts/cache-instructions`);
//! see also mimalloc_rust's open pull request 170, which proposes the same dispatch.
//!
//! So, much as std's own `System` allocator does with `malloc` (which asks only that the
//! alignment be at most 16 and no larger than the size): a request whose alignment is at most
//! mimalloc's natural one (16 bytes) goes to the plain calls for its size rounded up to a
//! multiple of the alignment, and its block is then aligned by its size class (classes are
//! multiples of 8 bytes, and a size that is a multiple of 16 falls in a class that is one too;
//! a page's first block is 16-aligned; the 24-, 40- and 56-byte classes give 8-byte alignment
//! only, hence the rounding). Anything else (a larger alignment, a size of 0) keeps the aligned
//! calls. Before the rounding, a hash table's block took the aligned path: hashbrown asks for
//! 16-byte alignment and a size (its buckets and 16 more control bytes) rarely a multiple of
//! 16, so every `HashMap` did, each request's `http::Extensions` among them (two a blob
//! request).
//!
//! It also counts, per thread, the bytes held ([`held`]): how a script's run is held to its
//! memory bound.
//!
//! The one module of the workspace allowed `unsafe`: an allocator is C's calls.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// mimalloc, with plain calls where the alignment asked for is one a size class gives anyway.
pub struct Allocator;

thread_local! {
    /// The bytes this thread allocated less those it freed, from an offset so that frees of
    /// other threads' blocks never take it below zero: what a script's engine measures of a
    /// run ([`held`]).
    static HELD: Cell<usize> = const { Cell::new(1 << 62) };
}

/// The bytes the calling thread holds (allocated less freed, from an arbitrary offset): a
/// script run's thread measures its memory by it (`ifmatch_cosmos::script`).
pub fn held() -> usize {
    HELD.try_with(Cell::get).unwrap_or(0)
}

#[inline]
fn count(grown: usize, shrunk: usize) {
    let _ = HELD.try_with(|held| held.set(held.get().wrapping_add(grown).wrapping_sub(shrunk)));
}

/// The alignment every block of mimalloc whose size is a multiple of it has (`MI_MAX_ALIGN_SIZE`).
const NATURAL: usize = 16;

/// The size to ask a plain call for, when a block of that size is aligned as `align` asks:
/// `size` rounded up to a multiple of it, for an alignment mimalloc's classes give.
fn plain_size(size: usize, align: usize) -> Option<usize> {
    (align <= NATURAL && size > 0).then(|| size.next_multiple_of(align))
}

/// A new block for `layout`, counted: by the `plain` call of mimalloc where its size classes
/// align the block as asked, else by the `aligned` one.
///
/// # Safety
///
/// As [`GlobalAlloc::alloc`]'s: `layout` has a non-zero size.
#[inline(always)]
unsafe fn allocate(
    layout: Layout,
    plain: unsafe extern "C" fn(usize) -> *mut c_void,
    aligned: unsafe extern "C" fn(usize, usize) -> *mut c_void,
) -> *mut u8 {
    count(layout.size(), 0);
    // SAFETY: mimalloc's calls for the same request, as the caller asks.
    unsafe {
        match plain_size(layout.size(), layout.align()) {
            Some(size) => plain(size).cast(),
            None => aligned(layout.size(), layout.align()).cast(),
        }
    }
}

// SAFETY: each call is mimalloc's own for the same request, and a block from either kind of
// call may be given to `mi_free` and `mi_realloc` (mimalloc finds a block's page from any
// pointer into it).
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as the caller gave it.
        unsafe { allocate(layout, mi::mi_malloc, mi::mi_malloc_aligned) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as the caller gave it.
        unsafe { allocate(layout, mi::mi_zalloc, mi::mi_zalloc_aligned) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(0, layout.size());
        // SAFETY: `ptr` came from this allocator.
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size, layout.size());
        // SAFETY: `ptr` came from this allocator with `layout`. `mi_realloc` keeps the block
        // when it fits (the block met `layout.align()` already) and otherwise moves the bytes
        // to a new plain block, aligned by its size class as `plain_size` requires.
        unsafe {
            if let Some(size) = plain_size(new_size, layout.align()) {
                mi::mi_realloc(ptr.cast(), size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size up to 64 KiB and a few beyond, at every alignment up to 4 KiB: each block is
    /// aligned as asked, writable over its whole size, and keeps its bytes through a realloc
    /// that grows it, one that shrinks it, and one that crosses between the two kinds of call.
    #[test]
    fn every_block_is_aligned_as_asked_and_keeps_its_bytes_through_realloc() {
        let sizes = (1..=1024).chain((1025..=65_536).step_by(56)).chain([
            100_000,
            1 << 20,
            (1 << 20) + 24,
            5 << 20,
        ]);
        let mut checked = 0;
        let pattern = |n: usize, len: usize| vec![n as u8 + 1; len];
        for size in sizes {
            for align in (0..=12).map(|shift| 1usize << shift) {
                let Ok(layout) = Layout::from_size_align(size, align) else {
                    continue;
                };
                // Several blocks of one class at once, so that not only a page's first is seen.
                let blocks: Vec<*mut u8> =
                    (0..3).map(|_| unsafe { Allocator.alloc(layout) }).collect();
                for (n, &block) in blocks.iter().enumerate() {
                    assert!(!block.is_null(), "{layout:?}");
                    assert_eq!(block as usize % align, 0, "{layout:?}, block {n}");
                    unsafe { block.write_bytes(n as u8 + 1, size) };
                }
                for (n, block) in blocks.into_iter().enumerate() {
                    let mut block = block;
                    let mut len = size;
                    for new_size in [size * 2 + 8, size / 2 + 1, size + 1] {
                        let kept = len.min(new_size);
                        block = unsafe {
                            Allocator.realloc(
                                block,
                                Layout::from_size_align(len, align).unwrap(),
                                new_size,
                            )
                        };
                        assert!(!block.is_null());
                        assert_eq!(block as usize % align, 0, "{layout:?} to {new_size}");
                        let bytes = unsafe { std::slice::from_raw_parts(block, kept) };
                        assert!(bytes == pattern(n, kept), "{layout:?} to {new_size}");
                        unsafe { block.write_bytes(n as u8 + 1, new_size) };
                        len = new_size;
                    }
                    unsafe {
                        Allocator.dealloc(block, Layout::from_size_align(len, align).unwrap())
                    };
                }
                let zeroed = unsafe { Allocator.alloc_zeroed(layout) };
                assert_eq!(zeroed as usize % align, 0, "zeroed {layout:?}");
                assert!(unsafe { std::slice::from_raw_parts(zeroed, size) } == vec![0; size]);
                unsafe { Allocator.dealloc(zeroed, layout) };
                checked += 1;
            }
        }
        assert!(checked > 20_000, "{checked} layouts checked");
    }
}
