//! Rule text → verdict: the stages run in order, with their errors.
//!
//! Parse errors stop before the staged files are opened; name and type errors
//! stop after only their footers were read (exit 2, nothing scanned). Then the
//! fused plans run, `published.*` metrics are computed over the published
//! version when there is one, and the judge produces the verdict.
//!
//! `rules` reads the rule file; `prepare` parses, checks and plans it against
//! the staged footers (with the `reference` tables `references` opens); `run`
//! runs the passes and judges, with the join passes of `joins`; `failed`
//! writes the offending rows; `publish` is the publish loop.

mod failed;
mod joins;
mod prepare;
pub mod publish;
mod references;
mod rules;
mod run;

pub use prepare::{lint_without_data, prepare, prepare_at, Prepared, Published};
pub use references::{resolve, References};
pub use rules::RuleSource;
pub use run::Telemetry;
