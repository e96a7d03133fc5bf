//! `eru-operator`: CLI wiring only.

use std::{path::PathBuf, process::ExitCode};

use chrono::{DateTime, Utc};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use eru_operator::{
    cli::{
        contexts::{self, Cluster},
        remote::{self, Failure, Remote},
    },
    config::RunArgs,
    eru::core::schedule::{self, Schedule},
    history::QueryError,
};

/// The Rust heap is jemalloc's, configured for a small resident set rather than speed: glibc's
/// malloc kept what a fleet restart freed (1,000s of short-lived requests, statuses and watch
/// events between the long-lived cache entries), so an operator holding 3,000 Erus stayed at 36
/// MB of anonymous memory after a burst instead of the 26 it started with; with jemalloc it is
/// back at 24 within a minute (docs/performance.md, "Memory"). SQLite's C allocations stay on
/// glibc's malloc ([`eru_operator::memory`]).
#[cfg(all(target_os = "linux", target_env = "gnu", not(feature = "system-allocator")))]
#[global_allocator]
static HEAP: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its first allocation (`_RJEM_MALLOC_CONF` in the environment
/// overrides them): one arena and no per-thread caches (each of the operator's dozen threads kept
/// its own: +9 MB at 3,000 Erus), freed pages returned after a second by a background thread, so
/// an idle operator shrinks too.
#[cfg(all(target_os = "linux", target_env = "gnu", not(feature = "system-allocator")))]
#[unsafe(export_name = "_rjem_malloc_conf")]
static HEAP_OPTIONS: Option<&'static std::ffi::c_char> = Some(
    // SAFETY: a pointer to the first byte of a static, NUL-terminated string.
    unsafe {
        &*c"narenas:1,tcache:false,dirty_decay_ms:1000,muzzy_decay_ms:0,background_thread:true".as_ptr()
    },
);

#[derive(Parser)]
#[command(
    name = "eru-operator",
    version,
    about = "Elegant Rolling Updates, PodSet and Memcached operator"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the operator.
    Run(Box<RunArgs>),
    /// Write the CRD manifests generated from the types.
    Crds {
        /// Directory to write into.
        #[arg(long, default_value = "crds")]
        out: PathBuf,
    },
    /// List the journal's records: of a running operator (--server), or read-only from its
    /// journal (--database: a copy, a backup, or the file of a stopped operator).
    History(HistoryArgs),
    /// Audit a window of the journal: is every slot of every Eru accounted exactly once? Of a
    /// running operator (--server), or read-only from its journal (--database).
    /// Exit status 0 when it is, 3 when not, 2 for bad arguments, 1 when it could not be read.
    Audit(AuditArgs),
    /// Ask an Eru for one manual restart now: sets its `mtsre.meitu.com/run-now` annotation to a
    /// new token (field manager `kubectl-eru`). The operator runs it once per token, through the
    /// fleet cap and the gates; `kubectl get eru NAME -o jsonpath='{.status.lastManualRun}'`
    /// shows how it went. Exit status 0 when the annotation is set, 2 for bad arguments, 1 when
    /// the cluster refused it.
    RunNow {
        /// The Eru: NS/NAME, or NAME in namespace `default`.
        #[arg(value_name = "NS/NAME", value_parser = parse_eru_name)]
        eru: String,
        /// The token (at most 63 characters); a new one by default (`manual-<time>`). The same
        /// token again runs nothing.
        #[arg(long)]
        token: Option<String>,
    },
    /// Resume an Eru paused on failure (spec.failurePolicy): sets its `mtsre.meitu.com/resume`
    /// annotation to `status.pausedOnFailure.since` (field manager `kubectl-eru-resume`); the operator
    /// resumes it at its next pass, and its next slot restarts. Exit status 0 when the annotation
    /// is set, 2 for bad arguments, 1 when the Eru is not paused or the cluster refused it.
    Resume {
        /// The Eru: NS/NAME, or NAME in namespace `default`.
        #[arg(value_name = "NS/NAME", value_parser = parse_eru_name)]
        eru: String,
    },
    /// Print the HTTP API's OpenAPI document (as served at /openapi.json), to generate clients.
    Openapi {
        #[arg(short = 'o', long = "output", value_enum, default_value_t = DocumentFormat::Json)]
        output: DocumentFormat,
    },
    /// Print the next slots of a schedule, one RFC 3339 UTC time a line.
    Schedule {
        /// Crontab expression (5 fields, 6 with seconds, or a macro such as @daily).
        expr: String,
        /// IANA time zone of the schedule.
        #[arg(long, default_value = "UTC")]
        time_zone: String,
        /// Start after this time (RFC 3339; default now).
        #[arg(long)]
        after: Option<DateTime<Utc>>,
        /// How many slots.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        count: u32,
        /// The Eru's namespace/name (NAME alone: namespace default), from which `H` is hashed.
        #[arg(long = "name", value_name = "NS/NAME", value_parser = parse_eru_name)]
        seed: Option<String>,
        /// `text`: a time a line; `json`: a list of times.
        #[arg(short = 'o', long = "output", value_enum, default_value_t = SlotsFormat::Text)]
        output: SlotsFormat,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum DocumentFormat {
    Json,
    Yaml,
}

#[derive(Clone, Copy, ValueEnum)]
enum SlotsFormat {
    Text,
    Json,
}

/// Which journal listing `history` prints.
#[derive(Clone, Copy, ValueEnum)]
enum Listing {
    /// Restarts (as `GET /history`).
    Restarts,
    /// Missed and skipped slots (as `GET /missed`).
    Missed,
    /// Every slot's one ledger record, fired or not, with its restart (as `GET /slots`).
    Slots,
    /// State-machine transitions (as `GET /transitions`).
    Transitions,
}

impl Listing {
    fn path(self) -> &'static str {
        match self {
            Listing::Restarts => "/history",
            Listing::Missed => "/missed",
            Listing::Slots => "/slots",
            Listing::Transitions => "/transitions",
        }
    }
}

/// How `audit` prints its report.
#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// A text table for the terminal.
    Table,
    /// `GET /audit`'s answer.
    Json,
    /// One line per Eru.
    Csv,
    /// To paste into an incident review.
    Markdown,
}

/// Where `history` and `audit` read: a running operator, or a journal.
#[derive(Args)]
struct SourceArgs {
    /// A running operator's HTTP API, e.g. https://localhost:8443 after `kubectl -n eru-system
    /// port-forward svc/eru-operator 8443:8080`. Asks it, with a bearer token, what the offline
    /// commands read from a journal. `audit` takes it more than once: one audit across clusters
    /// (a verdict per cluster, then the union; exit 1 if one cannot be read, else 3 if one is
    /// not accounted).
    #[arg(
        long,
        env = "ERU_SERVER",
        value_name = "URL",
        value_delimiter = ',',
        group = "remote"
    )]
    server: Vec<String>,
    /// The bearer token sent to --server; default: the kubeconfig user's token (or the pod's
    /// ServiceAccount token in a cluster).
    #[arg(
        long,
        env = "ERU_TOKEN",
        hide_env_values = true,
        conflicts_with = "token_file"
    )]
    token: Option<String>,
    /// Read the token from this file.
    #[arg(long, value_name = "PATH", requires = "server")]
    token_file: Option<PathBuf>,
    /// The CA certificates (PEM) that --server's certificate must chain to: the CA of the
    /// operator's certificate, or the default self-signed certificate itself. Default: the
    /// system's root certificates.
    #[arg(
        long,
        env = "ERU_CACERT",
        value_name = "PATH",
        alias = "certificate-authority"
    )]
    cacert: Option<PathBuf>,
    /// Do not verify --server's certificate (its name and issuer): anyone on the way can read the
    /// token.
    #[arg(long, requires = "remote", conflicts_with = "cacert")]
    insecure_skip_tls_verify: bool,
    /// The name --server's certificate carries, when it is not --server's host: e.g.
    /// eru-operator.eru-system.svc for a certificate of the Service reached on localhost.
    #[arg(long, value_name = "NAME", requires = "server")]
    tls_server_name: Option<String>,
    /// The kubeconfig whose user's token is sent, and whose contexts --all-contexts reads
    /// (default: $KUBECONFIG, ~/.kube/config).
    #[arg(long, value_name = "PATH", requires = "remote")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context whose user's token is sent. With several --server: one context
    /// per --server, in the same order (each cluster is then named by its context), or one for
    /// all.
    #[arg(long, requires = "server")]
    context: Vec<String>,
    /// The journal, opened read-only (no migration, no write, no file created): a SQLite file (a
    /// copy, or the file of a stopped operator), or a `postgres://` URL. The default when no
    /// --server is given.
    #[arg(long, env = "ERU_DATABASE", value_name = "PATH|URL", hide_env_values = true)]
    database: Option<String>,
    /// Which of --server, --database and --token the command line gave (the others may come
    /// from the environment: the command line wins).
    #[arg(skip)]
    given: Given,
}

/// The flags of a source the command line gave (not the environment).
#[derive(Clone, Copy, Default)]
struct Given {
    server: bool,
    database: bool,
    token: bool,
}

/// The journal when neither --server nor --database is given.
const DEFAULT_DATABASE: &str = "./eru.db";

#[derive(Args)]
// The group `remote` is --server and --all-contexts, which --kubeconfig and
// --insecure-skip-tls-verify require. Both may be present (--server may come from ERU_SERVER,
// then left aside; the command line's is refused with --all-contexts). It holds no other field:
// clap's derive leaves a struct's own group empty of its fields when the struct flattens another
// (`source`), and the two arguments join it by `group = "remote"`; tests/offline.rs checks that
// `audit --kubeconfig F --since 1h` is still refused.
#[group(id = "remote", multiple = true)]
struct AuditArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Start of the window: an RFC 3339 time, or a duration before now (24h, 30m, 7d); 24 hours
    /// before --until by default.
    #[arg(long, value_parser = time_arg)]
    since: Option<String>,
    /// End of the window (exclusive): an RFC 3339 time, or a duration before now; now by default.
    #[arg(long, value_parser = time_arg)]
    until: Option<String>,
    /// The Erus' namespace (default: every namespace the token may read: cluster-wide).
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// The Eru.
    #[arg(long)]
    name: Option<String>,
    /// The workload: a Deployment's name, or StatefulSet/<name>, DaemonSet/<name>.
    #[arg(long)]
    target: Option<String>,
    /// With --database: the cluster-wide blackouts file the operator runs with
    /// (`--blackouts-file`), to list them (a running operator lists its own).
    #[arg(long, value_name = "PATH", conflicts_with = "server")]
    blackouts_file: Option<PathBuf>,
    /// One audit across every cluster of the kubeconfig: each context that names its operator's
    /// HTTP API in an `eru.mtsre.meitu.com` extension (`server`, optionally
    /// `certificate-authority`, `tls-server-name`; docs/api.md) is a cluster, named by its
    /// context and asked with its user's token. Contexts without one are listed as not audited.
    /// ERU_SERVER and ERU_TOKEN do not apply.
    #[arg(long, group = "remote", conflicts_with_all = ["context", "token_file", "tls_server_name"])]
    all_contexts: bool,
    /// Output format (`--format` still works).
    #[arg(short = 'o', long = "output", alias = "format", value_enum, default_value_t = Format::Table)]
    output: Format,
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Json,
}

#[derive(Args)]
struct HistoryArgs {
    #[command(flatten)]
    source: SourceArgs,
    #[arg(value_enum, default_value_t = Listing::Restarts)]
    listing: Listing,
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// The Eru (or, for transitions, any object).
    #[arg(long)]
    name: Option<String>,
    /// The Eru's uid: only its own ledger, not a namesake's (restarts, missed, slots).
    #[arg(long)]
    uid: Option<String>,
    /// The workload: a Deployment's name, or StatefulSet/<name>, DaemonSet/<name>.
    #[arg(long)]
    target: Option<String>,
    /// Restarts: in_progress, succeeded, failed, abandoned.
    #[arg(long)]
    outcome: Option<String>,
    /// Missed, slots: operator_down, journal_unavailable, past_deadline, suspended, target_paused, ...
    #[arg(long)]
    reason: Option<String>,
    /// Slots: fired, missed, skipped.
    #[arg(long)]
    result: Option<String>,
    /// Transitions: Eru, PodSet, Memcached.
    #[arg(long)]
    kind: Option<String>,
    /// An RFC 3339 time, or a duration before now (24h, 30m, 7d).
    #[arg(long, value_parser = time_arg)]
    since: Option<String>,
    /// An RFC 3339 time (exclusive), or a duration before now.
    #[arg(long, value_parser = time_arg)]
    until: Option<String>,
    #[arg(long)]
    limit: Option<String>,
    /// `next_cursor` of a previous page (JSON output shows it).
    #[arg(long)]
    cursor: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Table)]
    output: Output,
}

fn main() -> ExitCode {
    let argv0 = std::env::args_os().next();
    let name = eru_operator::cli::program_name(argv0.as_deref());
    let matches = Cli::command().bin_name(name).get_matches();
    let mut cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    if let (
        Command::History(HistoryArgs { source, .. }) | Command::Audit(AuditArgs { source, .. }),
        Some((_, sub)),
    ) = (&mut cli.command, matches.subcommand())
    {
        let given = |id: &str| sub.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
        source.given = Given {
            server: given("server"),
            database: given("database"),
            token: given("token"),
        };
    }
    match cli.command {
        Command::Run(args) => run(*args),
        Command::Crds { out } => match eru_operator::crds::write_all(&out) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: writing CRDs to {}: {e}", out.display());
                ExitCode::FAILURE
            }
        },
        Command::History(args) => history(args),
        Command::RunNow { eru, token } => run_now(&eru, token),
        Command::Resume { eru } => resume(&eru),
        Command::Audit(args) => audit(args),
        Command::Openapi { output } => {
            use utoipa::OpenApi;
            let document = eru_operator::http::ApiDoc::openapi();
            match output {
                DocumentFormat::Json => {
                    println!("{}", document.to_pretty_json().expect("the document serializes"))
                }
                DocumentFormat::Yaml => print!(
                    "{}",
                    serde_yaml::to_string(&document).expect("the document serializes")
                ),
            }
            ExitCode::SUCCESS
        }
        Command::Schedule {
            expr,
            time_zone,
            after,
            count,
            seed,
            output,
        } => preview(&expr, &time_zone, after, count, seed.as_deref(), output),
    }
}

/// `--since`/`--until`: an RFC 3339 time, or a duration before now, as the API's RFC 3339.
fn time_arg(value: &str) -> Result<String, String> {
    eru_operator::cli::when::time_arg(value, Utc::now())
}

/// `run-now`: sets the annotation, says which token and how to follow it.
fn run_now(eru: &str, token: Option<String>) -> ExitCode {
    use eru_operator::cli::run_now::{new_token, run_now};
    let (namespace, name) = eru.split_once('/').unwrap_or(("default", eru));
    let token = token.unwrap_or_else(|| new_token(Utc::now()));
    if let Err(e) = eru_operator::eru::core::run::Asked::token(&token) {
        eprintln!("error: --token: {e}");
        return ExitCode::from(2);
    }
    match runtime().block_on(run_now(namespace, name, &token)) {
        Ok(token) => {
            println!(
                "asked Eru {namespace}/{name} for a manual run, token {token:?}\n\
                 follow it: kubectl get eru -n {namespace} {name} -o jsonpath='{{.status.lastManualRun}}'"
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `resume`: sets the annotation, says which pause and how to follow it.
fn resume(eru: &str) -> ExitCode {
    use eru_operator::cli::resume::{Resumed, resume};
    let (namespace, name) = eru.split_once('/').unwrap_or(("default", eru));
    match runtime().block_on(resume(namespace, name)) {
        Ok(Resumed::Asked(since)) => {
            println!(
                "asked Eru {namespace}/{name} to resume its pause on failure since {since}\n\
                 follow it: kubectl get eru -n {namespace} {name} -o jsonpath='{{.status.phase}}'"
            );
            ExitCode::SUCCESS
        }
        Ok(Resumed::NotPaused) => {
            eprintln!(
                "error: Eru {namespace}/{name} is not paused on failure (its status.pausedOnFailure is empty)"
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--name NS/NAME` (or `NAME`, in namespace `default`) as the seed of `H` fields.
fn parse_eru_name(value: &str) -> Result<String, String> {
    let (namespace, name) = value.split_once('/').unwrap_or(("default", value));
    if namespace.is_empty() || name.is_empty() || name.contains('/') {
        return Err(format!("'{value}' is not NAMESPACE/NAME or NAME"));
    }
    Ok(schedule::eru_seed(namespace, name))
}

/// `schedule`: the next slots on stdout, one a line; with `H`, the resolved pattern on stderr
/// (`# H 3 * * * for default/web = 35 3 * * *`), so scripts reading stdout see no change.
fn preview(
    expr: &str,
    time_zone: &str,
    after: Option<DateTime<Utc>>,
    count: u32,
    seed: Option<&str>,
    output: SlotsFormat,
) -> ExitCode {
    let parsed = match seed {
        Some(seed) => Schedule::parse_for(expr, Some(time_zone), seed),
        None => Schedule::parse(expr, Some(time_zone)),
    };
    match parsed {
        Ok(schedule) => {
            // `resolve` only changes an expression with H (besides joining fields with one space)
            let written = expr.split_whitespace().collect::<Vec<_>>().join(" ");
            if let Some(seed) = seed
                && let Ok(resolved) = schedule::resolve(expr, seed)
                && resolved != written
            {
                eprintln!("# {written} for {seed} = {resolved}");
            }
            let slots: Vec<String> = (schedule.upcoming(after.unwrap_or_else(Utc::now), count as usize))
                .into_iter()
                .map(|slot| slot.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                .collect();
            match output {
                SlotsFormat::Text => slots.iter().for_each(|slot| println!("{slot}")),
                SlotsFormat::Json => {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&slots).expect("times serialize")
                    )
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Where a command reads.
enum Source {
    /// A journal, read-only.
    Journal(String),
    /// A running operator's HTTP API.
    Server(Remote),
}

/// The failure of a command: its message (`error: …` on stderr) and exit status.
struct Exit(String, u8);

impl From<QueryError> for Exit {
    fn from(e: QueryError) -> Self {
        match e {
            QueryError::Invalid(message) => Exit(message, 2),
            e => Exit(e.to_string(), 1),
        }
    }
}

impl From<Failure> for Exit {
    fn from(e: Failure) -> Self {
        match e {
            Failure::Invalid(message) => Exit(message, 2),
            Failure::Failed(message) => Exit(message, 1),
        }
    }
}

/// A current-thread runtime for one command.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

impl SourceArgs {
    /// The source these flags name: --server, else --database (or ./eru.db). Given both, the
    /// one of the command line wins over the one of the environment.
    async fn open(&self) -> Result<Source, Exit> {
        let given = (self.given.server, self.given.database);
        let server = match (self.server.as_slice(), &self.database, given) {
            ([_, _, ..], _, _) => {
                return Err(Exit(
                    "several --server: only `audit` reads more than one operator".into(),
                    2,
                ));
            }
            ([_], Some(_), (true, true)) => {
                return Err(Exit(
                    "--server and --database name two sources: give one".into(),
                    2,
                ));
            }
            ([_], Some(_), (false, false)) => {
                return Err(Exit(
                    "ERU_SERVER and ERU_DATABASE are both set: unset one, or give --server or --database"
                        .into(),
                    2,
                ));
            }
            ([_], Some(_), (false, true)) => None,
            (server, _, _) => server.first(),
        };
        let Some(server) = server else {
            return Ok(Source::Journal(
                self.database.clone().unwrap_or_else(|| DEFAULT_DATABASE.into()),
            ));
        };
        let context = match self.context.as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            _ => return Err(Exit("several --context for one --server".into(), 2)),
        };
        self.remote(&Cluster::of_server(server, server, context), false)
            .await
            .map(Source::Server)
    }

    /// The operator of `cluster`, asked with its context's token (or the flags'; a context of
    /// --all-contexts: its own alone).
    async fn remote(&self, cluster: &Cluster, all_contexts: bool) -> Result<Remote, Exit> {
        let options = remote::Options {
            server: cluster.server.clone(),
            token: (!all_contexts).then(|| self.token.clone()).flatten(),
            token_file: (!all_contexts).then(|| self.token_file.clone()).flatten(),
            cacert: cluster.cacert.clone().or_else(|| self.cacert.clone()),
            insecure_skip_tls_verify: self.insecure_skip_tls_verify,
            tls_server_name: (cluster.tls_server_name.clone()).or_else(|| self.tls_server_name.clone()),
            kubeconfig: self.kubeconfig.clone(),
            context: cluster.context.clone(),
        };
        Remote::new(&options).await.map_err(|e| Exit(e, 2))
    }

    /// The clusters of an audit across clusters, and the contexts not audited. With
    /// `all_contexts`: the kubeconfig's contexts that name their operator. Else each --server,
    /// named by its --context when one is given per --server, else by the server.
    fn clusters(&self, all_contexts: bool) -> Result<(Vec<Cluster>, Vec<String>), Exit> {
        if all_contexts {
            if self.given.server {
                return Err(Exit(
                    "--server with --all-contexts: the contexts name their operators".into(),
                    2,
                ));
            }
            if self.given.token {
                return Err(Exit(
                    "--token with --all-contexts: each context's user's token is sent".into(),
                    2,
                ));
            }
            let (kubeconfig, folder) = contexts::read(self.kubeconfig.as_deref()).map_err(|e| Exit(e, 2))?;
            let found = contexts::of(&kubeconfig, folder.as_deref()).map_err(|e| Exit(e, 2))?;
            if found.clusters.is_empty() {
                return Err(Exit(
                    format!(
                        "--all-contexts: no context of the kubeconfig names its operator (contexts: {}); \
                         give each cluster's context an {} extension with its operator's server \
                         (docs/api.md#one-audit-across-clusters)",
                        if found.without.is_empty() {
                            "none".into()
                        } else {
                            found.without.join(", ")
                        },
                        contexts::EXTENSION
                    ),
                    2,
                ));
            }
            return Ok((found.clusters, found.without));
        }
        let contexts: Vec<Option<String>> = match self.context.as_slice() {
            [] => vec![None; self.server.len()],
            [one] => vec![Some(one.clone()); self.server.len()],
            many if many.len() == self.server.len() => many.iter().cloned().map(Some).collect(),
            many => {
                return Err(Exit(
                    format!(
                        "{} --context for {} --server: give one per --server, in the same order, or one for all",
                        many.len(),
                        self.server.len()
                    ),
                    2,
                ));
            }
        };
        let named = self.context.len() > 1;
        let clusters = (self.server.iter().zip(contexts))
            .map(|(server, context)| {
                let name = match (&context, named) {
                    (Some(c), true) => c.clone(),
                    _ => server.clone(),
                };
                Cluster::of_server(&name, server, context)
            })
            .collect();
        Ok((clusters, Vec::new()))
    }
}

/// Runs `query` on the journal `database`, opened read-only.
async fn offline<T>(
    database: &str,
    query: impl AsyncFnOnce(eru_operator::journal::Journal) -> Result<T, QueryError>,
) -> Result<T, Exit> {
    let journal = eru_operator::journal::Journal::connect_read_only(database)
        .await
        .map_err(|e| Exit(e.to_string(), 1))?;
    let result = query(journal.clone()).await;
    journal.close().await;
    Ok(result?)
}

/// Prints `result`'s text, or its error with its exit status.
fn finish(result: Result<(String, u8), Exit>) -> ExitCode {
    match result {
        Ok((text, status)) => {
            print!("{text}");
            ExitCode::from(status)
        }
        Err(Exit(message, status)) => {
            eprintln!("error: {message}");
            ExitCode::from(status)
        }
    }
}

/// A listing's page as the command prints it: the API's JSON, or the table.
fn page_text<P: serde::Serialize>(page: &P, table: impl FnOnce(&P) -> String, output: Output) -> String {
    match output {
        Output::Json => serde_json::to_string_pretty(page).expect("pages serialize") + "\n",
        Output::Table => table(page),
    }
}

fn history(args: HistoryArgs) -> ExitCode {
    use eru_operator::history::{self as h, HistoryPage, MissedPage, SlotPage, TransitionPage};
    // The flags go through the HTTP API's own query parser: the same rules, the same errors.
    let query = h::params::query_string([
        ("namespace", args.namespace.as_deref()),
        ("name", args.name.as_deref()),
        ("uid", args.uid.as_deref()),
        ("target", args.target.as_deref()),
        ("outcome", args.outcome.as_deref()),
        ("reason", args.reason.as_deref()),
        ("result", args.result.as_deref()),
        ("kind", args.kind.as_deref()),
        ("since", args.since.as_deref()),
        ("until", args.until.as_deref()),
        ("limit", args.limit.as_deref()),
        ("cursor", args.cursor.as_deref()),
    ]);
    let output = args.output;
    let result = runtime().block_on(async {
        let listing = args.listing;
        let text = match (args.source.open().await?, listing) {
            (Source::Server(remote), _) => {
                let path = listing.path();
                match listing {
                    Listing::Restarts => {
                        h::parse::<h::HistoryParams>(&query)?;
                        page_text(
                            &remote.get::<HistoryPage>(path, &query)?,
                            HistoryPage::table,
                            output,
                        )
                    }
                    Listing::Missed => {
                        h::parse::<h::MissedParams>(&query)?;
                        page_text(
                            &remote.get::<MissedPage>(path, &query)?,
                            MissedPage::table,
                            output,
                        )
                    }
                    Listing::Slots => {
                        h::parse::<h::SlotParams>(&query)?;
                        page_text(&remote.get::<SlotPage>(path, &query)?, SlotPage::table, output)
                    }
                    Listing::Transitions => {
                        h::parse::<h::TransitionParams>(&query)?;
                        let page = remote.get::<TransitionPage>(path, &query)?;
                        page_text(&page, TransitionPage::table, output)
                    }
                }
            }
            (Source::Journal(database), Listing::Restarts) => {
                let page = offline(&database, async |j| h::history(&j, &h::parse(&query)?).await).await?;
                page_text(&page, HistoryPage::table, output)
            }
            (Source::Journal(database), Listing::Missed) => {
                let page = offline(&database, async |j| h::missed(&j, &h::parse(&query)?).await).await?;
                page_text(&page, MissedPage::table, output)
            }
            (Source::Journal(database), Listing::Slots) => {
                let page = offline(&database, async |j| h::slots(&j, &h::parse(&query)?).await).await?;
                page_text(&page, SlotPage::table, output)
            }
            (Source::Journal(database), Listing::Transitions) => {
                let page = offline(&database, async |j| h::transitions(&j, &h::parse(&query)?).await).await?;
                page_text(&page, TransitionPage::table, output)
            }
        };
        Ok::<_, Exit>((text, 0))
    });
    finish(result)
}

/// Exit status of an audit that found a slot not accounted exactly once.
const UNACCOUNTED: u8 = 3;

fn audit(args: AuditArgs) -> ExitCode {
    use eru_operator::history::{self as h, audit::Audit};
    // through the HTTP API's own query parser: the same rules, the same errors
    let query = h::params::query_string([
        ("namespace", args.namespace.as_deref()),
        ("name", args.name.as_deref()),
        ("target", args.target.as_deref()),
        ("since", args.since.as_deref()),
        ("until", args.until.as_deref()),
    ]);
    if args.source.server.len() > 1 || args.all_contexts {
        return finish(runtime().block_on(audit_clusters(&args, &query)));
    }
    let result = runtime().block_on(async {
        let params: h::audit::AuditParams = h::parse(&query)?;
        let report: Audit = match args.source.open().await? {
            Source::Server(remote) => {
                params.window(Utc::now())?;
                remote.get("/audit", &query)?
            }
            Source::Journal(database) => {
                let blackouts =
                    eru_operator::eru::cluster_blackouts::ClusterBlackouts::load(args.blackouts_file.clone())
                        .map_err(|e| Exit(e.to_string(), 2))?
                        .current();
                offline(&database, async |j| {
                    h::audit::read(&j, &params, Utc::now(), &blackouts, h::audit::Reads::REPORT).await
                })
                .await?
            }
        };
        let text = match args.output {
            Format::Table => report.table(),
            Format::Json => serde_json::to_string_pretty(&report).expect("an audit serializes") + "\n",
            Format::Csv => report.csv(),
            Format::Markdown => report.markdown(),
        };
        let status = if report.verdict.accounted { 0 } else { UNACCOUNTED };
        Ok::<_, Exit>((text, status))
    });
    finish(result)
}

/// `audit` with several --server: each cluster's operator asked for the same window; one that
/// cannot be read (refused, unreachable) is named as such; bad arguments (a flag of any
/// cluster's, a refused query) fail the command, exit 2.
async fn audit_clusters(args: &AuditArgs, query: &str) -> Result<(String, u8), Exit> {
    use eru_operator::{
        cli::clusters::{ClusterAudit, Clusters},
        history::{self as h, audit::Audit},
    };
    let params: h::audit::AuditParams = h::parse(query)?;
    params.window(Utc::now())?;
    if matches!(args.output, Format::Csv) {
        return Err(Exit(
            "-o csv reads one cluster: use table, json or markdown".into(),
            2,
        ));
    }
    // (ERU_DATABASE in the environment is left aside, as ERU_SERVER is under --all-contexts)
    if args.source.given.database || args.blackouts_file.is_some() {
        return Err(Exit(
            "an audit across clusters reads running operators: --database and --blackouts-file do not apply"
                .into(),
            2,
        ));
    }
    // every cluster's flags first (a bad URL, token file or context given on the command line is
    // a bad argument: exit 2); a context of --all-contexts whose user or operator cannot be used
    // (an exec plugin that fails, a malformed server) is that cluster's finding: not read, exit 1
    let mut remotes = Vec::new();
    let (named, not_audited) = args.source.clusters(args.all_contexts)?;
    for cluster in named {
        let remote = match args.source.remote(&cluster, args.all_contexts).await {
            Ok(remote) => Ok(remote),
            Err(Exit(message, _)) if args.all_contexts => Err(format!("context {}: {message}", cluster.name)),
            Err(Exit(message, status)) => return Err(Exit(format!("{}: {message}", cluster.name), status)),
        };
        remotes.push((cluster.name, cluster.server, remote));
    }
    let mut clusters = Vec::new();
    for (name, server, remote) in remotes {
        let remote = match remote {
            Ok(remote) => remote,
            Err(unusable) => {
                clusters.push(ClusterAudit::new(name, server, Err(unusable)));
                continue;
            }
        };
        let audit = match remote.get::<Audit>("/audit", query) {
            Ok(audit) => Ok(audit),
            Err(Failure::Invalid(message)) => return Err(Exit(format!("{name}: {message}"), 2)),
            Err(Failure::Failed(message)) => Err(message),
        };
        clusters.push(ClusterAudit::new(name, server, audit));
    }
    let all = Clusters::new(clusters, not_audited);
    let text = match args.output {
        Format::Table => all.table(),
        Format::Json => serde_json::to_string_pretty(&all).expect("audits serialize") + "\n",
        Format::Markdown | Format::Csv => all.markdown(),
    };
    Ok((text, all.exit()))
}

fn run(args: RunArgs) -> ExitCode {
    if let Err(e) = args.validate() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    init_tracing(&args);
    eru_operator::memory::one_malloc_arena();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(eru_operator::app::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing(args: &RunArgs) {
    let filter = tracing_subscriber::EnvFilter::new(&args.log_level);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match args.log_format {
        eru_operator::config::LogFormat::Json => builder.json().init(),
        eru_operator::config::LogFormat::Text => builder.init(),
    }
}
