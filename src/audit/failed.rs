//! `--failed-rows DIR` after an audit: the sources the failed-rows passes
//! read besides the staged files (references, the other published
//! partitions), and each written file named in its check.

use super::joins;
use super::prepare::Prepared;
use crate::check::Metric;
use crate::failed::{self, FailedRowsError};
use crate::verdict::{Status, Verdict};

impl Prepared {
    /// Writes the offending rows of every check of `verdict` that did not
    /// hold (see [`crate::failed`]) and names each file in its check. What
    /// could not be written is in the result's errors; nothing else of the
    /// verdict changes.
    pub async fn write_failed_rows(
        &self,
        verdict: &mut Verdict,
        opts: &failed::Options,
    ) -> failed::Written {
        let across_failed = self
            .checked
            .statements
            .iter()
            .zip(&verdict.checks)
            .any(|(s, c)| {
                matches!(s.metric, Metric::DuplicateAcrossPublished(_)) && c.status == Status::Fail
            });
        let mut errors = Vec::new();
        let others = if across_failed {
            match joins::other_partitions(self).await {
                Ok(Ok(parts)) => Some(parts),
                Ok(Err(_)) => None,
                Err(e) => {
                    errors.push(FailedRowsError::Select {
                        lines: "across published".into(),
                        source: e.into(),
                    });
                    None
                }
            }
        } else {
            None
        };
        let sources = failed::Sources {
            references: &self.references,
            published: others.as_deref(),
            engine: (self.plan.join_engine, self.plan.join_test_bits),
        };
        let mut written = failed::write(
            &self.ctx,
            &self.input,
            &self.checked,
            verdict,
            &sources,
            opts,
        )
        .await;
        for (i, file) in &written.files {
            if let Some(c) = verdict.checks.get_mut(*i) {
                c.failed_rows = Some(file.clone());
            }
        }
        errors.append(&mut written.errors);
        written.errors = errors;
        written
    }
}
