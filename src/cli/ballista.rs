//! `dqgate ballista scheduler|executor`: a Ballista process that can run
//! dqgate's plans (for `--engine ballista://HOST:PORT`).

use crate::error::Error;
use crate::exec::ballista::{serve_executor, serve_scheduler, ExecutorOptions};
use crate::units::parse_size;

/// `dqgate ballista ...`: a scheduler or an executor carrying dqgate's functions.
#[derive(Debug, clap::Subcommand)]
pub enum Role {
    /// Run a Ballista scheduler that can plan dqgate's audits.
    Scheduler {
        /// Address to listen on, HOST:PORT (port 0: any free port; the
        /// address is printed on stderr once listening).
        #[arg(long, default_value = "127.0.0.1:50050", value_name = "HOST:PORT")]
        bind: String,
        /// The host name executors and clients use to reach this scheduler
        /// (default: the bound address).
        #[arg(long, value_name = "HOST")]
        external_host: Option<String>,
    },
    /// Run a Ballista executor that can run dqgate's audits.
    Executor {
        /// The scheduler to register with, HOST:PORT.
        #[arg(long, value_name = "HOST:PORT")]
        scheduler: String,
        /// Address to serve results (Arrow Flight) on, HOST:PORT.
        #[arg(long, default_value = "127.0.0.1:50051", value_name = "HOST:PORT")]
        bind: String,
        /// Port the scheduler pushes tasks to.
        #[arg(long, default_value_t = 50052)]
        grpc_port: u16,
        /// The host name the scheduler and other executors use to reach
        /// this one (default: as the scheduler sees it).
        #[arg(long, value_name = "HOST")]
        external_host: Option<String>,
        /// Tasks run at once (default: all cores).
        #[arg(long)]
        concurrent_tasks: Option<usize>,
        /// Memory for running tasks, e.g. 8GiB; larger work spills to disk
        /// (default: a fraction of the host's memory).
        #[arg(long, value_parser = parse_size)]
        memory_pool_size: Option<usize>,
        /// Directory for shuffle files and spills (default: a temporary one).
        #[arg(long)]
        work_dir: Option<std::path::PathBuf>,
    },
}

/// Runs a scheduler or executor until it is stopped.
pub(super) async fn serve(role: Role) -> Result<u8, Error> {
    Ok(match role {
        Role::Scheduler {
            bind,
            external_host,
        } => serve_scheduler(&bind, external_host).await?,
        Role::Executor {
            scheduler,
            bind,
            grpc_port,
            external_host,
            concurrent_tasks,
            memory_pool_size,
            work_dir,
        } => {
            serve_executor(ExecutorOptions {
                scheduler,
                bind,
                grpc_port,
                external_host,
                concurrent_tasks,
                memory_pool_size,
                work_dir,
            })
            .await?
        }
    })
}
