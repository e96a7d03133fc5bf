//! `eru-operator`: CLI wiring only.

use std::{path::PathBuf, process::ExitCode};

use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};
use eru_operator::{
    config::RunArgs,
    eru::schedule::{self, Schedule},
};

/// The Rust heap is jemalloc's, configured for a small resident set rather than speed: glibc's
/// malloc kept what a fleet restart freed (1,000s of short-lived requests, statuses and watch
/// events between the long-lived cache entries), so an operator holding 3,000 Erus stayed at 36
/// MB of anonymous memory after a burst instead of the 26 it started with; with jemalloc it is
/// back at 24 within a minute (docs/performance.md, "Memory"). SQLite's C allocations stay on
/// glibc's malloc ([`eru_operator::memory`]).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static HEAP: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its first allocation (`_RJEM_MALLOC_CONF` in the environment
/// overrides them): one arena and no per-thread caches (each of the operator's dozen threads kept
/// its own: +9 MB at 3,000 Erus), freed pages returned after a second by a background thread, so
/// an idle operator shrinks too.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
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
    Run(RunArgs),
    /// Write the CRD manifests generated from the types.
    Crds {
        /// Directory to write into.
        #[arg(long, default_value = "crds")]
        out: PathBuf,
    },
    /// Read the journal file directly (for audits while the operator is not running).
    History(HistoryArgs),
    /// Audit a window of the journal: is every slot of every Eru accounted exactly once?
    /// Exit status 0 when it is, 3 when not, 2 for bad arguments.
    Audit(AuditArgs),
    /// Print the HTTP API's OpenAPI document (as served at /openapi.json), to generate clients.
    Openapi,
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
    },
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

/// How `audit` prints its report.
#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// A text table for the terminal.
    Table,
    Json,
    /// One line per Eru.
    Csv,
    /// To paste into an incident review.
    Markdown,
}

#[derive(Args)]
struct AuditArgs {
    /// The journal: a SQLite file, or a `postgres://` URL.
    #[arg(
        long,
        env = "ERU_DATABASE",
        default_value = "./eru.db",
        value_name = "PATH|URL"
    )]
    database: String,
    /// Start of the window (RFC 3339); 24 hours before --until by default.
    #[arg(long)]
    since: Option<String>,
    /// End of the window (RFC 3339, exclusive); now by default.
    #[arg(long)]
    until: Option<String>,
    #[arg(long)]
    namespace: Option<String>,
    /// The Eru.
    #[arg(long)]
    name: Option<String>,
    /// The workload: a Deployment's name, or StatefulSet/<name>, DaemonSet/<name>.
    #[arg(long)]
    target: Option<String>,
    /// The cluster-wide blackouts file the operator runs with (`--blackouts-file`), to list them.
    #[arg(long)]
    blackouts_file: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Json,
}

#[derive(Args)]
struct HistoryArgs {
    /// The journal: a SQLite file, or a `postgres://` URL.
    #[arg(
        long,
        env = "ERU_DATABASE",
        default_value = "./eru.db",
        value_name = "PATH|URL"
    )]
    database: String,
    #[arg(value_enum, default_value_t = Listing::Restarts)]
    listing: Listing,
    #[arg(long)]
    namespace: Option<String>,
    /// The Eru (or, for transitions, any object).
    #[arg(long)]
    name: Option<String>,
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
    /// RFC 3339.
    #[arg(long)]
    since: Option<String>,
    /// RFC 3339.
    #[arg(long)]
    until: Option<String>,
    #[arg(long)]
    limit: Option<String>,
    /// `next_cursor` of a previous page (JSON output shows it).
    #[arg(long)]
    cursor: Option<String>,
    #[arg(long, value_enum, default_value_t = Output::Table)]
    output: Output,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run(args),
        Command::Crds { out } => match eru_operator::crds::write_all(&out) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: writing CRDs to {}: {e}", out.display());
                ExitCode::FAILURE
            }
        },
        Command::History(args) => history(args),
        Command::Audit(args) => audit(args),
        Command::Openapi => {
            use utoipa::OpenApi;
            println!(
                "{}",
                eru_operator::http::ApiDoc::openapi()
                    .to_pretty_json()
                    .expect("the document serializes")
            );
            ExitCode::SUCCESS
        }
        Command::Schedule {
            expr,
            time_zone,
            after,
            count,
            seed,
        } => preview(&expr, &time_zone, after, count, seed.as_deref()),
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
            for slot in schedule.upcoming(after.unwrap_or_else(Utc::now), count as usize) {
                println!("{}", slot.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs `query` on the journal `database` (a file that must exist, or a `postgres://` URL), as
/// the offline commands do; `Err` with the exit status of a journal that is not there.
fn offline<T>(
    database: &str,
    query: impl AsyncFnOnce(eru_operator::journal::Journal) -> Result<T, eru_operator::history::QueryError>,
) -> Result<Result<T, eru_operator::history::QueryError>, ExitCode> {
    if !eru_operator::journal::is_postgres_url(database) && !std::path::Path::new(database).exists() {
        eprintln!("error: journal {database} does not exist");
        return Err(ExitCode::from(2));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    Ok(runtime.block_on(async {
        let journal = eru_operator::journal::Journal::connect(database).await?;
        query(journal).await
    }))
}

fn history(args: HistoryArgs) -> ExitCode {
    let result = offline(&args.database, async |journal| {
        // The flags go through the HTTP API's own query parser: the same rules, the same errors.
        let query = eru_operator::history::params::query_string([
            ("namespace", args.namespace.as_deref()),
            ("name", args.name.as_deref()),
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
        let (json, table) = match args.listing {
            Listing::Restarts => {
                let page =
                    eru_operator::history::history(&journal, &eru_operator::history::parse(&query)?).await?;
                (serde_json::to_string_pretty(&page), page.table())
            }
            Listing::Missed => {
                let page =
                    eru_operator::history::missed(&journal, &eru_operator::history::parse(&query)?).await?;
                (serde_json::to_string_pretty(&page), page.table())
            }
            Listing::Slots => {
                let page =
                    eru_operator::history::slots(&journal, &eru_operator::history::parse(&query)?).await?;
                (serde_json::to_string_pretty(&page), page.table())
            }
            Listing::Transitions => {
                let page =
                    eru_operator::history::transitions(&journal, &eru_operator::history::parse(&query)?)
                        .await?;
                (serde_json::to_string_pretty(&page), page.table())
            }
        };
        Ok::<_, eru_operator::history::QueryError>(match args.output {
            Output::Json => json.expect("pages serialize") + "\n",
            Output::Table => table,
        })
    });
    let result = match result {
        Ok(result) => result,
        Err(exit) => return exit,
    };
    match result {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(eru_operator::history::QueryError::Invalid(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Exit status of an audit that found a slot not accounted exactly once.
const UNACCOUNTED: u8 = 3;

fn audit(args: AuditArgs) -> ExitCode {
    let blackouts = match eru_operator::eru::blackout::ClusterBlackouts::load(args.blackouts_file.clone()) {
        Ok(b) => b.current(),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let result = offline(&args.database, async |journal| {
        // through the HTTP API's own query parser: the same rules, the same errors
        let query = eru_operator::history::params::query_string([
            ("namespace", args.namespace.as_deref()),
            ("name", args.name.as_deref()),
            ("target", args.target.as_deref()),
            ("since", args.since.as_deref()),
            ("until", args.until.as_deref()),
        ]);
        let params = eru_operator::history::parse(&query)?;
        eru_operator::history::audit::read(&journal, &params, Utc::now(), &blackouts, true).await
    });
    let result = match result {
        Ok(result) => result,
        Err(exit) => return exit,
    };
    match result {
        Ok(report) => {
            let text = match args.format {
                Format::Table => report.table(),
                Format::Json => serde_json::to_string_pretty(&report).expect("an audit serializes") + "\n",
                Format::Csv => report.csv(),
                Format::Markdown => report.markdown(),
            };
            print!("{text}");
            if report.verdict.accounted {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(UNACCOUNTED)
            }
        }
        Err(eru_operator::history::QueryError::Invalid(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
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
