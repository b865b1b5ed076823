//! What the command line prints on stdout: verdicts in the chosen format,
//! flushed whole; and the log level (`-v`).

use std::io::Write as _;

use super::args::{ColorWhen, Format};
use crate::verdict::{json, junit, markdown, text, Verdict};

/// `-v`: the process's log level, set once from the arguments (as ripgrep
/// sets `log`'s maximum level); a normal run prints its result and one
/// summary line on stderr.
static VERBOSE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub(super) fn verbose() -> bool {
    VERBOSE.load(std::sync::atomic::Ordering::Relaxed)
}

/// Sets the log level (`-v`), once, from the arguments.
pub(super) fn set_verbose(on: bool) {
    VERBOSE.store(on, std::sync::atomic::Ordering::Relaxed);
}

pub(super) fn print_stdout(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

pub(super) fn emit(v: &Verdict, format: Format, color: ColorWhen) {
    match format {
        Format::Json => print_stdout(&json::to_json(v)),
        Format::Text => print_stdout(&text::render_with(v, color.for_stdout())),
        Format::Junit => print_stdout(&junit::render(v)),
        Format::Markdown => print_stdout(&markdown::render(v)),
    }
}
