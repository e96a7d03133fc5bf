//! `eru-operator`: CLI wiring only.

use std::{path::PathBuf, process::ExitCode};

use chrono::{DateTime, Utc};
use clap::{Parser, Subcommand};
use eru::{config::RunArgs, eru::schedule::Schedule};

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
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run(args),
        Command::Crds { out } => match eru::crds::write_all(&out) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: writing CRDs to {}: {e}", out.display());
                ExitCode::FAILURE
            }
        },
        Command::Schedule {
            expr,
            time_zone,
            after,
            count,
        } => match Schedule::parse(&expr, Some(&time_zone)) {
            Ok(schedule) => {
                for slot in schedule.upcoming(after.unwrap_or_else(Utc::now), count as usize) {
                    println!("{}", slot.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
    }
}

fn run(args: RunArgs) -> ExitCode {
    init_tracing(&args);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(eru::controller::run(args)) {
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
        eru::config::LogFormat::Json => builder.json().init(),
        eru::config::LogFormat::Text => builder.init(),
    }
}
