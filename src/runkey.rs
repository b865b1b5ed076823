//! The run key: `--partition KEY=VALUE` pairs that address one partition.
//!
//! A value becomes a directory name (`KEY=VALUE`) under the table root, so it
//! is validated before anything else happens: no `/`, no `..`, no NUL, not
//! empty. The keys must be exactly the rule file's `partitioned by` columns,
//! and the key order used everywhere is the rule file's.

use std::fmt;

/// Why a run key was rejected (a usage error, exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunKeyError {
    #[error("--partition `{0}` is not of the form KEY=VALUE")]
    NotKeyValue(String),
    #[error("--partition {key}: the value is empty")]
    EmptyValue { key: String },
    #[error("--partition {key}={value}: a value may not contain {what}")]
    BadValue {
        key: String,
        value: String,
        what: &'static str,
    },
    #[error("--partition {key}: the key is not a plain column name")]
    BadKey { key: String },
    #[error("--partition {0} is given twice")]
    Duplicate(String),
    #[error(
        "--partition {key} is not a run-key column: the rule file is partitioned by [{expected}]"
    )]
    Unexpected { key: String, expected: String },
    #[error("--partition {key}=... is missing: the rule file is partitioned by [{expected}]")]
    Missing { key: String, expected: String },
}

/// A validated run key, in the rule file's `partitioned by` order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunKey {
    pairs: Vec<(String, String)>,
}

impl RunKey {
    /// Parses `KEY=VALUE` arguments (in any order) and orders them like
    /// `partitioned_by`, which they must name exactly.
    pub fn parse(args: &[String], partitioned_by: &[String]) -> Result<RunKey, RunKeyError> {
        let mut given: Vec<(String, String)> = Vec::new();
        for arg in args {
            let (k, v) = parse_pair(arg)?;
            if given.iter().any(|(g, _)| *g == k) {
                return Err(RunKeyError::Duplicate(k));
            }
            given.push((k, v));
        }
        let expected = partitioned_by.join(", ");
        for (k, _) in &given {
            if !partitioned_by.contains(k) {
                return Err(RunKeyError::Unexpected {
                    key: k.clone(),
                    expected,
                });
            }
        }
        let mut pairs = Vec::new();
        for key in partitioned_by {
            match given.iter().find(|(k, _)| k == key) {
                Some(pair) => pairs.push(pair.clone()),
                None => {
                    return Err(RunKeyError::Missing {
                        key: key.clone(),
                        expected,
                    })
                }
            }
        }
        Ok(RunKey { pairs })
    }

    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The relative directory path: `k1=v1/k2=v2`.
    pub fn rel_dir(&self) -> String {
        self.pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("/")
    }
}

impl fmt::Display for RunKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s: Vec<String> = self.pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&s.join(" "))
    }
}

/// The pairs of a partition path `k1=v1/k2=v2` (segments without `=` are
/// passed over).
pub fn pairs_of_rel(rel: &str) -> Vec<(String, String)> {
    rel.split('/')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Parses and validates one `KEY=VALUE` argument.
pub fn parse_pair(arg: &str) -> Result<(String, String), RunKeyError> {
    let (k, v) = arg
        .split_once('=')
        .ok_or_else(|| RunKeyError::NotKeyValue(arg.to_string()))?;
    let key_ok = !k.is_empty()
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !k.starts_with(|c: char| c.is_ascii_digit());
    if !key_ok {
        return Err(RunKeyError::BadKey { key: k.to_string() });
    }
    let bad = |what| RunKeyError::BadValue {
        key: k.to_string(),
        value: v.escape_debug().to_string(),
        what,
    };
    if v.is_empty() {
        return Err(RunKeyError::EmptyValue { key: k.to_string() });
    }
    if v.contains('/') {
        return Err(bad("`/`"));
    }
    if v.contains('\\') {
        return Err(bad("`\\`"));
    }
    if v.contains("..") {
        return Err(bad("`..`"));
    }
    if v.contains('\0') {
        return Err(bad("a NUL byte"));
    }
    if v.chars().any(char::is_control) {
        return Err(bad("control characters"));
    }
    if v == "." {
        return Err(bad("only `.`"));
    }
    Ok((k.to_string(), v.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    fn args(a: &[&str]) -> Vec<String> {
        keys(a)
    }

    #[test]
    fn orders_pairs_like_partitioned_by() {
        let rk = RunKey::parse(&args(&["b=2", "a=1"]), &keys(&["a", "b"])).unwrap();
        assert_eq!(rk.rel_dir(), "a=1/b=2");
        assert_eq!(rk.get("b"), Some("2"));
    }

    #[test]
    fn rejects_bad_values() {
        let pk = keys(&["d"]);
        for bad in [
            "d=", "d=a/b", "d=..", "d=x..y", "d=a\0b", "d", "=x", "d=.", "d=a\\b",
        ] {
            assert!(
                RunKey::parse(&args(&[bad]), &pk).is_err(),
                "{bad:?} accepted"
            );
        }
        assert_eq!(
            RunKey::parse(&args(&["d=1", "d=2"]), &pk),
            Err(RunKeyError::Duplicate("d".into()))
        );
    }

    #[test]
    fn keys_must_match_exactly() {
        let pk = keys(&["a", "b"]);
        assert!(matches!(
            RunKey::parse(&args(&["a=1"]), &pk),
            Err(RunKeyError::Missing { .. })
        ));
        assert!(matches!(
            RunKey::parse(&args(&["a=1", "b=2", "c=3"]), &pk),
            Err(RunKeyError::Unexpected { .. })
        ));
        assert!(RunKey::parse(&[], &[]).unwrap().is_empty());
    }
}
