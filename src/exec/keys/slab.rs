//! Zeroed anonymous memory for the key engine's words and kept keys,
//! mapped on demand (`mmap`), in huge pages or small ones.

use super::key::Key;

/// Zeroed anonymous memory of `len` words, mapped on demand: a page is
/// backed when first written (with a huge page where the kernel allows,
/// unless made with [`Slab::small_pages`]).
pub struct Slab<K: Key> {
    ptr: std::ptr::NonNull<K>,
    len: usize,
}

// SAFETY: a slab owns its mapping, as a `Box<[K]>` owns its allocation.
unsafe impl<K: Key> Send for Slab<K> {}
// SAFETY: shared access only reads.
unsafe impl<K: Key> Sync for Slab<K> {}

impl<K: Key> Slab<K> {
    /// `len` zeroed words. A refused mapping aborts the process, as a
    /// refused `Vec` allocation does.
    pub fn new(len: usize) -> Slab<K> {
        Slab::mapped(len, true)
    }

    /// `len` zeroed words in small pages: for memory written once from
    /// one end, where a huge page's first touch (clearing 2 MiB at once,
    /// and on a virtual machine, the host backing it) costs more than it
    /// saves in faults and TLB misses.
    pub fn small_pages(len: usize) -> Slab<K> {
        Slab::mapped(len, false)
    }

    fn mapped(len: usize, huge: bool) -> Slab<K> {
        let bytes = (len * K::BYTES).max(1);
        // SAFETY: a new private anonymous mapping aliases nothing.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        let Some(ptr) = std::ptr::NonNull::new(at.cast::<K>()).filter(|_| at != libc::MAP_FAILED)
        else {
            let layout = std::alloc::Layout::from_size_align(bytes, 4096)
                .unwrap_or(std::alloc::Layout::new::<K>());
            std::alloc::handle_alloc_error(layout);
        };
        #[cfg(target_os = "linux")]
        if huge {
            // SAFETY: the advice only changes how the kernel backs the pages
            // of our own mapping, never their contents. It is a hint: refused
            // (no transparent huge pages), the memory is the same.
            unsafe { libc::madvise(at, bytes, libc::MADV_HUGEPAGE) };
        }
        #[cfg(not(target_os = "linux"))]
        let _ = huge;
        Slab { ptr, len }
    }

    pub fn words(&self) -> &[K] {
        // SAFETY: the mapping holds `len` words, zeroed or written, and every
        // bit pattern is a valid `K` (`Key`'s contract).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn words_mut(&mut self) -> &mut [K] {
        // SAFETY: as in `words`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The slab as bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: as in `words`; any byte is a valid `u8`, and `u8` needs no
        // alignment.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast(), self.len * K::BYTES) }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast(), self.len * K::BYTES) }
    }
}

impl<K: Key> Drop for Slab<K> {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and no slice of it outlives `self`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), (self.len * K::BYTES).max(1)) };
    }
}
