//! Names of the columns dqgate's own plans add.

/// The name of the row count column in grouped plans.
pub const ROWS: &str = "__dqgate_rows";
