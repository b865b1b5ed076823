//! Tokens of the rule language.
