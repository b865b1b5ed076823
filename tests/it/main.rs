//! dqgate's integration tests, built as one test binary.
//!
//! Fixtures live in `testdata/` (Parquet data written by
//! `cargo run --example gen_fixtures`, golden cases) and `rules/`.

mod across;
mod across_index;
mod across_pruning;
mod across_text;
mod across_zones;
mod architecture;
mod ballista;
mod bounds;
mod determinism;
mod failed_rows;
mod fastpath;
mod file_graph;
mod fuzz_corpus;
mod golden;
mod hostile;
mod keys;
mod keys_joins;
mod keys_pages;
mod lang_v2;
mod memory;
mod objstore;
mod oracle;
mod people;
mod producers;
mod props;
mod quiet;
mod reference_text;
mod reports;
mod suggest;
mod support;
