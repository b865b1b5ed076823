//! The `dqgate` binary: parse arguments, run, exit with the contract's code.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = dqgate::cli::Cli::parse();
    std::process::ExitCode::from(dqgate::cli::run(cli))
}
