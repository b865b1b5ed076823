//! Staged files on an object store: `s3://`, `gs://`, `az://` (and the other
//! Azure schemes) and `file://` URLs, through the `object_store` crate that
//! DataFusion reads with.
//!
//! A store is configured the way its ecosystem expects: the builder's
//! `from_env` reads `AWS_*`, `GOOGLE_*` or `AZURE_*` variables, then each
//! `--storage-option KEY=VALUE` is applied on top (the builders' own keys, plus
//! `max_retries` and `retry_timeout` for the retry policy). Discovery lists the
//! prefix once and keeps what the local walk would keep; each footer is read
//! with ranged GETs and then goes through exactly the checks, the fingerprint
//! and the schema logic of `staged/input.rs` (`staged/open.rs` assembles
//! them), so the same files give the same fingerprint wherever they live.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use datafusion::datasource::listing::ListingTableUrl;
use futures::stream::BoxStream;
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult, RetryConfig,
};
use url::Url;

use super::error::InputError;
use super::files::{is_data_file, is_hidden};
use super::footer::{check_size, footer_length};

/// How many footers are fetched at once: object-store latency, not bandwidth,
/// bounds discovery, so reads overlap.
pub(crate) const CONCURRENT_FOOTERS: usize = 16;

/// Where the staged files are: a local directory or an object-store prefix.
#[derive(Debug, Clone)]
pub enum Location {
    Local(std::path::PathBuf),
    Remote(Remote),
}

impl Location {
    /// `--staged` beside a `--table`: the `--storage-option`s belong to
    /// whichever of the two is on an object store (both, when both are), so
    /// staged files on a local disk take none when only the table is remote.
    pub fn parse_beside_table(
        staged: &std::path::Path,
        table: Option<&std::path::Path>,
        options: &[String],
    ) -> Result<Location, LocationError> {
        let remote_table = table.and_then(|t| t.to_str()).is_some_and(is_url);
        let staged_remote = staged.to_str().is_some_and(is_url);
        let options = if remote_table && !staged_remote {
            &[]
        } else {
            options
        };
        Location::parse(staged, options)
    }

    /// `--staged` as given: a URL (`scheme://...`) names an object-store
    /// prefix, anything else a local directory. `options` are
    /// `--storage-option` arguments, which only an object store takes.
    pub fn parse(arg: &std::path::Path, options: &[String]) -> Result<Location, LocationError> {
        match arg.to_str().filter(|s| is_url(s)) {
            Some(url) => Remote::open(url, options).map(Location::Remote),
            None if options.is_empty() => Ok(Location::Local(arg.to_path_buf())),
            None => Err(LocationError::OptionsWithoutStore),
        }
    }

    /// The location as messages show it.
    pub fn display(&self) -> String {
        match self {
            Location::Local(dir) => dir.display().to_string(),
            Location::Remote(r) => r.url.to_string(),
        }
    }

    /// The name of staged file `rel` as messages show it.
    pub fn name_of(&self, rel: &str) -> String {
        match self {
            Location::Local(dir) => dir.join(rel).display().to_string(),
            Location::Remote(r) => r.name_of(rel),
        }
    }
}

/// Whether a command-line location is a URL (`scheme://...`) rather than a
/// path. A Windows drive (`C:\`) is not.
pub fn is_url(s: &str) -> bool {
    s.split_once("://").is_some_and(|(scheme, _)| {
        scheme.len() > 1
            && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}

/// A bad object-store location or option (exit 2: the command line is wrong).
#[derive(Debug, thiserror::Error)]
pub enum LocationError {
    #[error("`{0}` is not a valid URL: {1}")]
    BadUrl(String, String),
    #[error("`{url}`: {reason}")]
    Unsupported { url: String, reason: String },
    #[error("--storage-option `{0}` is not KEY=VALUE")]
    BadOption(String),
    #[error("--storage-option `{key}` is not an option of {store}: {reason}")]
    UnknownOption {
        key: String,
        store: &'static str,
        reason: String,
    },
    #[error("--storage-option applies to object-store URLs (s3://, gs://, az://, file://), not to a local directory")]
    OptionsWithoutStore,
    #[error("cannot configure the store for `{url}`: {source}")]
    Build {
        url: String,
        #[source]
        source: object_store::Error,
    },
}

/// Why a staged file's URL could not be made for a scan.
#[derive(Debug, thiserror::Error)]
pub enum FileUrlError {
    #[error("{0}: not a hierarchical URL")]
    NotHierarchical(Url),
    #[error(transparent)]
    Listing(#[from] datafusion::error::DataFusionError),
}

/// An object-store prefix and the store that holds it.
#[derive(Debug, Clone)]
pub struct Remote {
    /// The location as given, with a trailing `/`; it never carries
    /// credentials (URLs with a password or a query are refused).
    pub url: Url,
    /// The prefix inside the store.
    pub prefix: ObjectPath,
    pub store: Arc<CountingStore>,
}

impl Remote {
    /// Parses the URL and builds its store from the environment and `options`.
    pub fn open(arg: &str, options: &[String]) -> Result<Remote, LocationError> {
        let bad = |reason: &str| LocationError::Unsupported {
            url: arg.to_string(),
            reason: reason.to_string(),
        };
        let mut url =
            Url::parse(arg).map_err(|e| LocationError::BadUrl(arg.into(), e.to_string()))?;
        if url.password().is_some() || url.query().is_some() || url.fragment().is_some() {
            return Err(bad(
                "credentials, queries and fragments do not belong in the URL; use the environment or --storage-option",
            ));
        }
        if !url.path().ends_with('/') {
            url.set_path(&format!("{}/", url.path()));
        }
        let (mut pairs, retry) = split_options(options)?;
        let store: Arc<dyn ObjectStore> = match url.scheme() {
            "file" => {
                if url.host_str().is_some_and(|h| !h.is_empty()) {
                    return Err(bad("a file:// URL must be absolute: file:///path/to/dir"));
                }
                if let Some((key, _)) = pairs.first() {
                    return Err(LocationError::UnknownOption {
                        key: key.clone(),
                        store: "a local file system",
                        reason: "file:// takes no options".into(),
                    });
                }
                Arc::new(object_store::local::LocalFileSystem::new())
            }
            "s3" | "s3a" => {
                let mut b = object_store::aws::AmazonS3Builder::from_env().with_url(url.as_str());
                for (k, v) in pairs.drain(..) {
                    b = b.with_config(parse_key(&k, "Amazon S3")?, v);
                }
                build(&url, b.with_retry(retry).build())?
            }
            "gs" => {
                let mut b =
                    object_store::gcp::GoogleCloudStorageBuilder::from_env().with_url(url.as_str());
                for (k, v) in pairs.drain(..) {
                    b = b.with_config(parse_key(&k, "Google Cloud Storage")?, v);
                }
                build(&url, b.with_retry(retry).build())?
            }
            "az" | "adl" | "azure" | "abfs" | "abfss" => {
                let mut b =
                    object_store::azure::MicrosoftAzureBuilder::from_env().with_url(url.as_str());
                for (k, v) in pairs.drain(..) {
                    b = b.with_config(parse_key(&k, "Azure storage")?, v);
                }
                build(&url, b.with_retry(retry).build())?
            }
            _ => {
                return Err(bad(
                    "unsupported scheme; use s3://, gs://, az://, abfs://, abfss:// or file://",
                ))
            }
        };
        if url.scheme() != "file" && url.host_str().is_none_or(str::is_empty) {
            return Err(bad("the URL names no bucket or container"));
        }
        let prefix = ObjectPath::from_url_path(url.path())
            .map_err(|e| LocationError::BadUrl(arg.into(), e.to_string()))?;
        Ok(Remote {
            url,
            prefix,
            store: Arc::new(CountingStore::new(store)),
        })
    }

    /// The URL of staged file `rel` (a `/`-separated path below the prefix),
    /// as DataFusion's listing table takes it.
    pub fn file_url(&self, rel: &str) -> Result<ListingTableUrl, FileUrlError> {
        let mut url = self.url.clone();
        url.path_segments_mut()
            .map_err(|()| FileUrlError::NotHierarchical(self.url.clone()))?
            .pop_if_empty()
            .extend(rel.split('/'));
        Ok(ListingTableUrl::try_new(url, None)?)
    }

    /// The data files below the prefix as the local walk would keep them
    /// (relative path, sorted), with their metadata; none is an error.
    pub async fn list_files(&self) -> Result<Vec<(String, ObjectMeta)>, InputError> {
        let shown = self.url.to_string();
        let listed: Vec<ObjectMeta> = self
            .store
            .list(Some(&self.prefix))
            .try_collect()
            .await
            .map_err(|e| remote_error(&shown, e))?;
        let mut found: Vec<(String, ObjectMeta)> = listed
            .into_iter()
            .filter_map(|meta| {
                let parts: Vec<String> = meta
                    .location
                    .prefix_match(&self.prefix)?
                    .map(|p| p.as_ref().to_string())
                    .collect();
                let keep = !parts.is_empty()
                    && !parts.iter().any(|p| is_hidden(p))
                    && parts.last().is_some_and(|p| is_data_file(p));
                keep.then(|| (parts.join("/"), meta))
            })
            .collect();
        if found.is_empty() {
            return Err(InputError::NoFiles(shown));
        }
        found.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(found)
    }

    /// The object of `rel`, a `/`-separated path below the prefix.
    pub fn path_of(&self, rel: &str) -> ObjectPath {
        rel.split('/')
            .fold(self.prefix.clone(), |p, part| p.join(part))
    }

    /// Whether `other` is the same bucket (or container) of the same kind of
    /// store, so that objects can be copied inside the store.
    pub fn same_bucket(&self, other: &Remote) -> bool {
        self.url.scheme() == other.url.scheme() && self.url.host_str() == other.url.host_str()
    }

    /// The metadata of the object at `rel`; `None` when there is none.
    pub async fn head(&self, rel: &str) -> Result<Option<ObjectMeta>, InputError> {
        match self.store.head(&self.path_of(rel)).await {
            Ok(meta) => Ok(Some(meta)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(remote_error(&self.name_of(rel), e)),
        }
    }

    /// The size and footer of the object at `rel` (a HEAD, then the footer
    /// reads of discovery).
    pub(crate) async fn footer_of(&self, rel: &str) -> Result<(u64, Vec<u8>), InputError> {
        let meta = self.head(rel).await?.ok_or_else(|| InputError::Remote {
            url: self.name_of(rel),
            reason: "no such object".into(),
        })?;
        Ok((meta.size, self.read_footer(rel, &meta).await?))
    }

    /// The URL of `rel` as messages show it.
    pub fn name_of(&self, rel: &str) -> String {
        format!("{}{rel}", self.url)
    }

    /// The footer of one object: its first 4 and last 8 bytes (one request
    /// when they are close, else two at once), then the footer itself.
    pub(crate) async fn read_footer(
        &self,
        rel: &str,
        meta: &ObjectMeta,
    ) -> Result<Vec<u8>, InputError> {
        let shown = format!("{}{rel}", self.url);
        let size = meta.size;
        check_size(&shown, size)?;
        let ranges: [Range<u64>; 2] = [0..4, size - 8..size];
        let ends = self
            .store
            .get_ranges(&meta.location, &ranges)
            .await
            .map_err(|e| remote_error(&shown, e))?;
        let len = footer_length(&shown, size, &ends[0], &ends[1])?;
        let mut footer = self
            .store
            .get_range(&meta.location, size - 8 - len..size - 8)
            .await
            .map_err(|e| remote_error(&shown, e))?
            .to_vec();
        footer.extend_from_slice(&ends[1]);
        Ok(footer)
    }
}

pub(crate) fn remote_error(url: &str, e: object_store::Error) -> InputError {
    InputError::Remote {
        url: url.to_string(),
        reason: tidy(&e.to_string()),
    }
}

/// Replaces an S3-style XML error body in a message with its code and text.
fn tidy(message: &str) -> String {
    let tag = |name: &str| {
        let open = format!("<{name}>");
        let start = message.find(&open)? + open.len();
        let len = message[start..].find(&format!("</{name}>"))?;
        Some(&message[start..start + len])
    };
    match (message.find(": <?xml"), tag("Code"), tag("Message")) {
        (Some(body), Some(code), Some(text)) => format!("{}: {code}: {text}", &message[..body]),
        _ => message.to_string(),
    }
}

fn build<S: ObjectStore>(
    url: &Url,
    built: object_store::Result<S>,
) -> Result<Arc<dyn ObjectStore>, LocationError> {
    built
        .map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
        .map_err(|source| LocationError::Build {
            url: url.to_string(),
            source,
        })
}

fn parse_key<K: std::str::FromStr<Err = object_store::Error>>(
    key: &str,
    store: &'static str,
) -> Result<K, LocationError> {
    key.to_ascii_lowercase()
        .parse()
        .map_err(|e: object_store::Error| LocationError::UnknownOption {
            key: key.to_string(),
            store,
            reason: e.to_string(),
        })
}

/// Splits `KEY=VALUE` options into the store's own and dqgate's retry policy
/// (`max_retries`, `retry_timeout` in seconds).
fn split_options(
    options: &[String],
) -> Result<(Vec<(String, String)>, RetryConfig), LocationError> {
    let mut retry = RetryConfig::default();
    let mut pairs = Vec::new();
    for o in options {
        let (k, v) = o
            .split_once('=')
            .filter(|(k, _)| !k.trim().is_empty())
            .ok_or_else(|| LocationError::BadOption(o.clone()))?;
        let k = k.trim();
        let number = || {
            v.trim()
                .parse::<u64>()
                .map_err(|_| LocationError::UnknownOption {
                    key: k.to_string(),
                    store: "dqgate's retry policy",
                    reason: format!("`{v}` is not a whole number"),
                })
        };
        match k.to_ascii_lowercase().as_str() {
            "max_retries" => retry.max_retries = number()? as usize,
            "retry_timeout" => retry.retry_timeout = Duration::from_secs(number()?),
            _ => pairs.push((k.to_string(), v.to_string())),
        }
    }
    Ok((pairs, retry))
}

/// A store that counts the GET and HEAD requests made through it and the bytes they
/// returned, for the run's summary line. Every other call is passed through.
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    gets: AtomicU64,
    bytes: AtomicU64,
}

impl CountingStore {
    fn new(inner: Arc<dyn ObjectStore>) -> CountingStore {
        CountingStore {
            inner,
            gets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    /// GET and HEAD requests (ranged or whole) and the bytes returned so far.
    pub fn reads(&self) -> (u64, u64) {
        (
            self.gets.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.inner)
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &ObjectPath,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let head = options.head;
        let result = self.inner.get_opts(location, options).await?;
        self.gets.fetch_add(1, Ordering::Relaxed);
        if !head {
            self.bytes
                .fetch_add(result.range.end - result.range.start, Ordering::Relaxed);
        }
        Ok(result)
    }

    // `get_ranges` is left to the trait's default, which coalesces nearby
    // ranges and issues each request through `get_opts` above, as the cloud
    // stores do: so the count is the number of requests S3 would see.

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<ObjectPath>>,
    ) -> BoxStream<'static, object_store::Result<ObjectPath>> {
        self.inner.delete_stream(locations)
    }

    fn list(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &ObjectPath,
        to: &ObjectPath,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_paths() {
        assert!(is_url("s3://bucket/x"));
        assert!(is_url("file:///tmp/x"));
        assert!(!is_url("data/staged"));
        assert!(!is_url("C:\\data"));
        assert!(!is_url("weird name://x"));
    }

    #[test]
    fn options() {
        let (pairs, retry) = split_options(&[
            "aws_region=eu-west-1".into(),
            "max_retries=0".into(),
            "retry_timeout=5".into(),
        ])
        .unwrap();
        assert_eq!(pairs, vec![("aws_region".into(), "eu-west-1".into())]);
        assert_eq!(retry.max_retries, 0);
        assert_eq!(retry.retry_timeout, Duration::from_secs(5));
        assert!(split_options(&["novalue".into()]).is_err());
        assert!(split_options(&["max_retries=lots".into()]).is_err());
    }

    #[test]
    fn xml_error_bodies_are_shortened() {
        let raw = "Error performing GET http://h/b in 5ms - Server returned non-2xx status code: 403 Forbidden: <?xml version=\"1.0\"?>\n<Error><Code>SignatureDoesNotMatch</Code><Message>The signature does not match.</Message><RequestId>x</RequestId></Error>";
        assert_eq!(
            tidy(raw),
            "Error performing GET http://h/b in 5ms - Server returned non-2xx status code: 403 Forbidden: SignatureDoesNotMatch: The signature does not match."
        );
        assert_eq!(tidy("connection refused"), "connection refused");
    }

    #[test]
    fn refusals() {
        let refused = |url: &str| Remote::open(url, &[]).unwrap_err().to_string();
        assert!(refused("s3://key:secret@bucket/p/").contains("credentials"));
        assert!(refused("s3://bucket/p/?sig=1").contains("credentials"));
        assert!(refused("ftp://host/p/").contains("unsupported scheme"));
        assert!(refused("file://relative/p").contains("absolute"));
        let unknown = Remote::open("s3://bucket/p/", &["colour=blue".into()])
            .unwrap_err()
            .to_string();
        assert!(
            unknown.contains("`colour` is not an option of Amazon S3"),
            "{unknown}"
        );
    }
}
