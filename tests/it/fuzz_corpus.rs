//! Replays the fuzz corpus (seeds and every finding kept as a regression)
//! through the fuzz target's body on the stable toolchain, so the target
//! compiles in CI and past findings stay fixed.

use std::fs;

#[path = "../../fuzz/harness.rs"]
mod harness;

#[test]
fn fuzz_corpus_replays_without_panic() {
    let dir = crate::support::repo().join("fuzz/corpus/parse_check");
    let mut n = 0;
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        harness::run(&fs::read(&path).unwrap());
        n += 1;
    }
    assert!(n >= 10, "the corpus is missing");
}
