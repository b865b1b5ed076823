//! Passed verdict + staged directory → atomic swap into the table (issue 3).

/// Why `publish`, `verify`, `rollback` or `gc` stopped.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("{0}")]
    Refused(String),
}

impl PublishError {
    pub fn exit_code(&self) -> u8 {
        match self {
            PublishError::Refused(_) => 2,
        }
    }
}
