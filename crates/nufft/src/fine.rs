//! The fine grid's memory: allocated on huge pages where it is large,
//! zeroed in parallel.

use recon_core::{Complex, Real};

/// A zeroed fine grid. Fresh memory costs a page fault per page on its
/// first write: 27,000 faults (53 ms) for sodium Q's 113 MB grid, 1.4 s for
/// the 2 GB grid of Q at 128^3 written by one thread. So grids of at least
/// 2 MiB are aligned to 2 MiB and offered to the kernel for transparent
/// huge pages (a fault per 2 MiB where the system allows it), and zeroed in
/// parallel. (A calloc'ed grid, zeroed by the kernel as the scattered
/// spreading touches it, was slower still.)
pub(crate) fn zeroed_grid<T: Real>(len: usize) -> FineGrid<T> {
    use rayon::prelude::*;
    use std::alloc::{alloc, handle_alloc_error, Layout};
    const HUGE: usize = 2 << 20;
    let bytes = len.max(1) * std::mem::size_of::<Complex<T>>();
    let align = if bytes >= HUGE {
        HUGE
    } else {
        std::mem::align_of::<Complex<T>>()
    };
    let layout = Layout::from_size_align(bytes, align).expect("fine grid size overflows");
    // SAFETY: the layout is non-zero. madvise only advises on memory this
    // function owns. Every value is written (all-zero bits are 0.0 for f32
    // and f64) before the Vec takes the memory.
    unsafe {
        let p = alloc(layout) as *mut Complex<T>;
        if p.is_null() {
            handle_alloc_error(layout);
        }
        #[cfg(target_os = "linux")]
        if align == HUGE {
            // Advice only: without huge pages the grid works the same.
            libc::madvise(p as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE);
        }
        let chunk = 1 << 16;
        let base = p as usize;
        (0..len.div_ceil(chunk)).into_par_iter().for_each(|i| {
            let start = i * chunk;
            let count = chunk.min(len - start);
            std::ptr::write_bytes((base as *mut Complex<T>).add(start), 0, count);
        });
        FineGrid {
            ptr: p,
            len,
            layout,
        }
    }
}

/// A fine grid allocated by [`zeroed_grid`] (its alignment is not a
/// Vec's, so it frees itself with its own layout).
pub(crate) struct FineGrid<T> {
    ptr: *mut Complex<T>,
    len: usize,
    layout: std::alloc::Layout,
}

impl<T> std::ops::Deref for FineGrid<T> {
    type Target = [Complex<T>];
    fn deref(&self) -> &[Complex<T>] {
        // SAFETY: ptr holds len initialised values (zeroed_grid).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T> std::ops::DerefMut for FineGrid<T> {
    fn deref_mut(&mut self) -> &mut [Complex<T>] {
        // SAFETY: as above, and borrowed mutably once through &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T> Drop for FineGrid<T> {
    fn drop(&mut self) {
        // SAFETY: allocated by zeroed_grid with this layout.
        unsafe { std::alloc::dealloc(self.ptr as *mut u8, self.layout) }
    }
}
