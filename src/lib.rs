//! dqgate: a data-quality gate for staged Parquet partitions.
//!
//! ```text
//!  rule file ──dsl::parse──▶ RuleFile (AST, spans)
//!                               │  + Arrow schema of the staged files
//!                         check::check
//!                               ▼
//!                          CheckedRules (names and types resolved)
//!                               │
//!                 plan::AuditPlan::for_rules ──▶ AuditPlan (fused DataFusion plans)
//!                               │
//!  staged dir ──staged::StagedInput──▶ exec::observe ──▶ Observations
//!                               │
//!                        verdict::judge ──▶ Verdict ──▶ JSON / text / JUnit / Markdown
//!                               │ (only a PassedVerdict)
//!          audit::publish::run ──▶ a publish::Target: an atomic swap into
//!                                       ROOT/k=v (Hive) or one Delta commit
//! ```
//!
//! `report` renders saved verdict JSON and a table's audit records as HTML;
//! [`suggest`] profiles staged files and writes a first rule file that holds
//! on them.
//!
//! [`audit`] runs the stages from rule text to verdict; the CLI (`cli`) is a
//! thin layer over it.
//!
//! Dependencies between the modules run one way, down this pipeline, with the
//! leaves [`value`], [`scalar`], [`diagnostic`], [`runkey`] and [`units`]
//! below it; [docs/architecture.md](../docs/architecture.md) in the
//! repository draws the module graph,
//! says where each subcommand enters and which helpers are kept by hand, and
//! `tests/it/architecture.rs` and `tests/it/file_graph.rs` fail on a cycle
//! between modules or between files.

pub mod audit;
pub mod check;
pub mod cli;
pub mod diagnostic;
pub mod dsl;
pub mod engine;
pub mod error;
pub mod exec;
pub mod failed;
mod hooks;
pub mod keyindex;
pub mod plan;
pub mod publish;
pub mod report;
pub mod runkey;
pub mod scalar;
pub mod staged;
pub mod suggest;
#[cfg(test)]
mod test_rng;
pub mod units;
pub mod value;
pub mod verdict;

pub use error::Error;
