//! check stage.
