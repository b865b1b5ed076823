//! Sizes and ages as people write them on the command line (`2GiB`, `7d`).
//!
//! Kept by hand rather than taken from `bytesize` or `humantime`: here every
//! size unit is binary (`512MB` is 512 × 2^20 bytes) and an age is one whole
//! number with one unit. `bytesize` reads `MB` as 10^6 bytes and `humantime`
//! accepts compound durations (`1h 30m`, `2weeks`), each with its own error
//! text, so either would change what `--memory-limit`, `--memory-pool-size`
//! and `--min-age` accept and print.

/// Why a size or an age on the command line is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("`{0}` is not an age such as 7d, 12h, 30m or 0s")]
    NotAnAge(String),
    #[error("`{0}` is too long an age")]
    AgeTooLong(String),
    #[error("`{0}` is not a size like 2GiB")]
    NotASize(String),
    #[error("unknown size unit `{0}`")]
    UnknownUnit(String),
}

/// Parses an age: a whole number with `s`, `m`, `h` or `d` (`7d`, `0s`).
pub fn parse_age(s: &str) -> Result<std::time::Duration, UnitError> {
    let t = s.trim();
    let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: u64 = num
        .parse()
        .map_err(|_| UnitError::NotAnAge(s.to_string()))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(UnitError::NotAnAge(s.to_string())),
    };
    n.checked_mul(seconds)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| UnitError::AgeTooLong(s.to_string()))
}

/// Parses `2GiB`, `512MB`, `1g`, `1048576`.
pub fn parse_size(s: &str) -> Result<usize, UnitError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| UnitError::NotASize(s.to_string()))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024f64.powi(4),
        other => return Err(UnitError::UnknownUnit(other.to_string())),
    };
    Ok((n * mult) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn ages() {
        assert_eq!(
            parse_age("7d"),
            Ok(std::time::Duration::from_secs(7 * 86_400))
        );
        assert_eq!(parse_age("0s"), Ok(std::time::Duration::ZERO));
        assert!(parse_age("7").is_err());
        assert!(parse_age("week").is_err());
    }

    #[test]
    pub(super) fn sizes() {
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("512mb"), Ok(512 << 20));
        assert_eq!(parse_size("100"), Ok(100));
        assert!(parse_size("lots").is_err());
    }
}
