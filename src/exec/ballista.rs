//! Running the plans on an Apache DataFusion Ballista cluster
//! (`--engine ballista://HOST:PORT`), and the scheduler and executor that
//! know dqgate's functions (`dqgate ballista scheduler|executor`).
//!
//! The client side is the same session as the local engine's, upgraded with
//! Ballista's query planner: each pass's logical plan goes to the scheduler,
//! which plans it physically, splits it into stages at its repartitions and
//! hands the stages to the executors; the client receives only the pass's
//! result (one row for the fused aggregate, the duplicated keys of a key
//! check). Everything dqgate builds into a plan is DataFusion's own (a
//! `ListingTable` over the listed files, built-in expressions) except the
//! `exact_sum` aggregate, which the scheduler (to plan) and the executors
//! (to run) must know by name: [`functions`] is registered in both.
//!
//! The scheduler and the executors read the staged files themselves, at the
//! paths the client lists: they must see the same file system or object store.
//! An object store (`s3://`, `gs://`, `az://`...) is built on first use from
//! the scheduler's or executor's own environment (`AWS_*`, `GOOGLE_*`,
//! `AZURE_*`), the way `--staged URL` builds it in the client ([`EnvStores`]).

use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use ballista_core::extension::SessionStateExt;
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_core::utils::default_session_builder;
use ballista_core::RuntimeProducer;
use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::{create_scheduler, start_grpc_service_with_listener};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::Schema;
use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use datafusion::execution::object_store::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::{FunctionRegistry, SessionState, SessionStateBuilder};
use datafusion::logical_expr::AggregateUDF;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};

use object_store::ObjectStore;

use super::ExecError;
use crate::plan::fsum::ExactSum;
use crate::staged::remote::Remote;

/// The port a Ballista scheduler listens on unless told otherwise.
pub const DEFAULT_SCHEDULER_PORT: u16 = 50050;

/// How long the client waits for the scheduler to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The aggregate functions dqgate's plans call beyond DataFusion's built-ins.
pub fn functions() -> Vec<Arc<AggregateUDF>> {
    vec![Arc::new(ExactSum::udaf())]
}

/// Why `--engine` names no engine; each says the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("unknown engine `{0}`: use `local` or `ballista://HOST:PORT`")]
    Unknown(String),
    #[error("engine `{spec}`: {reason}; use `local` or `ballista://HOST:PORT`")]
    BadAddress {
        spec: String,
        reason: url::ParseError,
    },
    #[error("engine `{0}` names no host; use `local` or `ballista://HOST:PORT`")]
    NoHost(String),
    #[error(
        "engine `{0}`: only a host and a port are allowed; use `local` or `ballista://HOST:PORT`"
    )]
    MoreThanAddress(String),
}

/// `ballista://HOST[:PORT]` → `HOST:PORT` (the port defaults to Ballista's
/// 50050). Any other engine name is an error naming the accepted forms.
pub fn scheduler_address(spec: &str) -> Result<String, EngineError> {
    let Some(rest) = spec.strip_prefix("ballista://") else {
        return Err(EngineError::Unknown(spec.to_string()));
    };
    let url =
        url::Url::parse(&format!("http://{rest}")).map_err(|reason| EngineError::BadAddress {
            spec: spec.to_string(),
            reason,
        })?;
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| EngineError::NoHost(spec.to_string()))?;
    if !url.username().is_empty()
        || url.password().is_some()
        || !matches!(url.path(), "" | "/")
        || url.query().is_some()
        || url.fragment().is_some()
    {
        return Err(EngineError::MoreThanAddress(spec.to_string()));
    }
    let port = url.port().unwrap_or(DEFAULT_SCHEDULER_PORT);
    Ok(format!("{host}:{port}"))
}

/// Fails with exit 3 unless the scheduler at `HOST:PORT` accepts a TCP
/// connection within a few seconds; so an unreachable cluster is reported
/// before any planning, by its address.
pub fn reach(scheduler: &str) -> Result<(), ExecError> {
    let fail = |why: String| {
        ExecError::Audit(format!(
            "cannot reach the Ballista scheduler at {scheduler}: {why}"
        ))
    };
    let addrs: Vec<_> = scheduler
        .to_socket_addrs()
        .map_err(|e| fail(e.to_string()))?
        .collect();
    let mut last = String::from("the host name resolves to no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(_) => return Ok(()),
            Err(e) => last = e.to_string(),
        }
    }
    Err(fail(last))
}

/// The local session `ctx` (its settings: case-sensitive identifiers, UTC,
/// target partitions, statistics) turned into a client of the scheduler at
/// `HOST:PORT`. Ballista sends the settings with each job, so the scheduler
/// plans under the same ones.
pub fn client(ctx: SessionContext, scheduler: &str) -> Result<SessionContext, DataFusionError> {
    let state = ctx
        .state()
        .upgrade_for_ballista(format!("http://{scheduler}"))?;
    Ok(SessionContext::new_with_state(state))
}

/// Whether `ctx` sends its plans to a Ballista cluster: they must then
/// serialize, so no table may live in this process only.
pub fn is_client(ctx: &SessionContext) -> bool {
    ctx.state()
        .config()
        .options()
        .extensions
        .get::<ballista_core::config::BallistaConfig>()
        .is_some()
}

/// `batch` with the column types of `schema`: Ballista's shuffles and its
/// Flight transfer to the client unpack dictionary-encoded columns, which the
/// local engine returns as they are; casting back gives the consumers of a
/// pass's result (top-k samples) the batches the local engine gives.
pub fn conform(batch: RecordBatch, schema: &Schema) -> Result<RecordBatch, ArrowError> {
    if batch.schema().fields() == schema.fields() {
        return Ok(batch);
    }
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| cast(c, f.data_type()))
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(Arc::new(schema.clone()), columns)
}

/// Object stores of a scheduler or executor: `file://` as DataFusion has it,
/// and any other store built on first use from this process's environment
/// (as [`Remote::open`] builds it for `--staged URL` without
/// `--storage-option`), then kept.
#[derive(Debug, Default)]
pub struct EnvStores {
    known: DefaultObjectStoreRegistry,
}

impl ObjectStoreRegistry for EnvStores {
    fn register_store(
        &self,
        url: &url::Url,
        store: Arc<dyn ObjectStore>,
    ) -> Option<Arc<dyn ObjectStore>> {
        self.known.register_store(url, store)
    }

    fn get_store(&self, url: &url::Url) -> datafusion::common::Result<Arc<dyn ObjectStore>> {
        if let Ok(store) = self.known.get_store(url) {
            return Ok(store);
        }
        let root = format!(
            "{}://{}/",
            url.scheme(),
            &url[url::Position::BeforeHost..url::Position::AfterPort]
        );
        let remote = Remote::open(&root, &[])
            .map_err(|e| DataFusionError::Execution(format!("no object store for {root}: {e}")))?;
        let store: Arc<dyn ObjectStore> = remote.store;
        self.known.register_store(url, store.clone());
        Ok(store)
    }
}

/// The scheduler's session for a job: Ballista's default plus dqgate's
/// functions, with stores from the environment.
fn scheduler_session(
    stores: Arc<EnvStores>,
) -> impl Fn(SessionConfig) -> datafusion::common::Result<SessionState> {
    move |config| {
        let runtime = RuntimeEnvBuilder::new()
            .with_object_store_registry(stores.clone())
            .build()?;
        let state = default_session_builder(config)?;
        let mut state = SessionStateBuilder::new_from_existing(state)
            .with_runtime_env(Arc::new(runtime))
            .build();
        for f in functions() {
            state.register_udaf(f)?;
        }
        Ok(state)
    }
}

/// What `dqgate ballista executor` runs with (its flags, parsed by the CLI).
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// The scheduler to register with, HOST:PORT.
    pub scheduler: String,
    /// Address to serve results (Arrow Flight) on, HOST:PORT.
    pub bind: String,
    /// Port the scheduler pushes tasks to.
    pub grpc_port: u16,
    /// The host name others use to reach this executor.
    pub external_host: Option<String>,
    /// Tasks run at once (`None`: all cores).
    pub concurrent_tasks: Option<usize>,
    /// Memory for running tasks in bytes (`None`: Ballista's default).
    pub memory_pool_size: Option<usize>,
    /// Directory for shuffle files and spills (`None`: a temporary one).
    pub work_dir: Option<std::path::PathBuf>,
}

/// Runs a Ballista executor carrying dqgate's functions until it is stopped.
pub async fn serve_executor(options: ExecutorOptions) -> Result<u8, ExecError> {
    let ExecutorOptions {
        scheduler,
        bind,
        grpc_port,
        external_host,
        concurrent_tasks,
        memory_pool_size,
        work_dir,
    } = options;
    let (scheduler_host, scheduler_port) = split_address(&scheduler, "--scheduler")?;
    let (bind_host, port) = split_address(&bind, "--bind")?;
    let work_dir = work_dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("dqgate-ballista-executor-{}", std::process::id()))
    });
    std::fs::create_dir_all(&work_dir)
        .map_err(|e| ExecError::Audit(format!("cannot create {}: {e}", work_dir.display())))?;
    let work_dir = work_dir
        .to_str()
        .ok_or_else(|| {
            ExecError::Usage(format!("--work-dir `{}` is not UTF-8", work_dir.display()))
        })?
        .to_string();
    let stores = Arc::new(EnvStores::default());
    let temp = work_dir.clone();
    let runtime: RuntimeProducer = Arc::new(move |_| {
        Ok(Arc::new(
            RuntimeEnvBuilder::new()
                .with_temp_file_path(temp.clone())
                .with_object_store_registry(stores.clone())
                .build()?,
        ))
    });
    let mut registry = BallistaFunctionRegistry::default();
    for f in functions() {
        registry.aggregate_functions.insert(f.name().to_string(), f);
    }
    let config = ExecutorProcessConfig {
        bind_host,
        port,
        grpc_port,
        external_host,
        scheduler_host,
        scheduler_port,
        vcores: concurrent_tasks.unwrap_or(0),
        work_dir: Some(work_dir),
        override_runtime_producer: Some(runtime),
        memory_pool_size: memory_pool_size.map(|n| n as u64),
        override_function_registry: Some(Arc::new(registry)),
        ..ExecutorProcessConfig::default()
    };
    eprintln!(
        "dqgate ballista executor: serving on {bind} (tasks on port {grpc_port}), scheduler {scheduler}"
    );
    start_executor_process(Arc::new(config))
        .await
        .map_err(|e| ExecError::Audit(format!("Ballista executor: {e}")))?;
    Ok(0)
}

/// Runs a Ballista scheduler that can plan dqgate's audits until it is stopped.
pub async fn serve_scheduler(bind: &str, external_host: Option<String>) -> Result<u8, ExecError> {
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|e| ExecError::Audit(format!("cannot listen on {bind}: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| ExecError::Audit(format!("cannot listen on {bind}: {e}")))?;
    let mut config = SchedulerConfig::default()
        .with_hostname(external_host.unwrap_or_else(|| addr.ip().to_string()))
        .with_port(addr.port())
        .with_override_session_builder(Arc::new(scheduler_session(Arc::default())));
    config.bind_host = addr.ip().to_string();
    let fail = |e: ballista_core::error::BallistaError| {
        ExecError::Audit(format!("Ballista scheduler: {e}"))
    };
    config.validate().map_err(fail)?;
    let cluster = BallistaCluster::new_from_config(&config)
        .await
        .map_err(fail)?;
    let server = create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, Arc::new(config))
        .await
        .map_err(fail)?;
    eprintln!("dqgate ballista scheduler: listening on {addr}");
    start_grpc_service_with_listener(listener, server)
        .await
        .map_err(fail)?;
    Ok(0)
}

/// `HOST:PORT` → its parts, for the executor's configuration.
fn split_address(s: &str, flag: &str) -> Result<(String, u16), ExecError> {
    let bad = || ExecError::Usage(format!("{flag} `{s}`: expected HOST:PORT"));
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    let port = port.parse().map_err(|_| bad())?;
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_addresses() {
        assert_eq!(
            scheduler_address("ballista://127.0.0.1:4000").unwrap(),
            "127.0.0.1:4000"
        );
        assert_eq!(
            scheduler_address("ballista://sched.example").unwrap(),
            "sched.example:50050"
        );
        for bad in [
            "spark://h:1",
            "ballista:/h:1",
            "ballista://",
            "ballista://h:1/path",
            "ballista://u@h:1",
            "ballista://h:notaport",
        ] {
            assert!(scheduler_address(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn executor_addresses() {
        assert_eq!(
            split_address("[::1]:7", "--bind").unwrap(),
            ("[::1]".to_string(), 7)
        );
        assert!(split_address("host", "--bind").is_err());
        assert!(split_address(":7", "--bind").is_err());
    }
}
