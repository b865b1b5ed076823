//! Why a key strategy gave up on the input, so that its caller runs the
//! strategy's fallback instead. It travels as an execution error, since the
//! first error stops every scan task, and is caught before it is shown;
//! its texts are those of the error strings that carried it before.

use super::text::Misfit;

/// Why a key strategy gave up on the input.
#[derive(Debug, thiserror::Error)]
pub enum GaveUp {
    /// The ordered scan saw the leading values go back.
    #[error("\u{0}order broken")]
    OutOfOrder,
    /// A run of one leading value of different keys grew too long to
    /// keep.
    #[error("\u{0}run too long")]
    LongRun,
    /// The text packing met a value (or a null) that its form does not fit.
    #[error("\u{0}text misfit: {0}")]
    Misfit(Misfit),
    /// A fingerprinted lookup's table of the staged keys grew past the
    /// most it keeps.
    #[error("\u{0}more than {0} distinct staged keys")]
    TooManyKeys(usize),
}
