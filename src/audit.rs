//! Rule text to verdict.
