//! A seeded generator for the unit tests' random cases (a 64-bit LCG, the
//! high bits kept): the same cases on every machine, no crate needed.

/// Numbers below the bound asked, from `seed`.
pub(crate) fn below(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed;
    move |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    }
}
