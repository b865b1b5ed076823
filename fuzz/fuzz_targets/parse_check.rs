//! libFuzzer target: arbitrary bytes through the rule-file front end.
//!
//! ```text
//! cargo fuzz run parse_check fuzz/corpus/parse_check
//! ```

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| harness::run(data));
