//! What the key engine's unit tests share: random numbers, the repeated
//! keys a map of every value expects, ranked, and the count of words.

use std::collections::HashMap;

/// The next of a xorshift sequence from `state` (not 0).
pub(super) fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Every repeated key of `want` (each value's rows) and of `nulls` null
/// rows (a null key as tag 0), ranked as the samples are: rows
/// descending, then tag and bytes ascending.
pub(super) fn ranked(want: &HashMap<Vec<u8>, u64>, nulls: u64) -> Vec<(u8, &[u8], u64)> {
    let mut ranked: Vec<(u8, &[u8], u64)> = (want.iter())
        .filter(|(_, n)| **n > 1)
        .map(|(v, n)| (1, v.as_slice(), *n))
        .chain((nulls > 1).then_some((0, &[][..], nulls)))
        .collect();
    ranked.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| (a.0, a.1).cmp(&(b.0, b.1))));
    ranked
}

/// What counting `words` must find: how many distinct words, and each
/// repeated word with its occurrences, in word order.
pub(super) fn counted(words: &[u64]) -> (u64, Vec<(u64, u64)>) {
    let mut want: HashMap<u64, u64> = HashMap::new();
    words.iter().for_each(|w| *want.entry(*w).or_default() += 1);
    let mut repeated: Vec<(u64, u64)> = (want.iter())
        .filter(|(_, n)| **n > 1)
        .map(|(w, n)| (*w, *n))
        .collect();
    repeated.sort_unstable();
    (want.len() as u64, repeated)
}
