//! Choosing a publish target from what a command names: the `--table`
//! argument and `--target`. Each target kind ([`Kind`]) says which tables it
//! claims, what it refuses, and how it opens; the kinds are listed once, in
//! [`KINDS`].

use std::path::Path;

use super::target::Kind;

/// The target kinds, in the order they claim a `--table` given without
/// `--target`; the last (Hive) claims every table. A new target is one
/// line here.
pub const KINDS: &[&dyn Kind] = &[&super::delta::Kind, &super::hive::Kind];

/// The kind of target `table` is: the one `--target` names, else the first
/// that claims it.
pub fn choose(target: Option<&str>, table: &Path) -> &'static dyn Kind {
    let named = target.and_then(|t| KINDS.iter().find(|k| k.name() == t));
    *named.unwrap_or_else(|| {
        KINDS
            .iter()
            .find(|k| k.claims(table))
            .unwrap_or(&KINDS[KINDS.len() - 1])
    })
}
