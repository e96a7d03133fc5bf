//! The crate's error type. Every variant maps to a fixed, bounded category used as a metric label
//! and an Event reason, so error text never reaches Prometheus.

/// Errors of the operator library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API error: {0}")]
    Kube(#[from] kube::Error),

    #[error("journal error: {0}")]
    Journal(#[from] sqlx::Error),

    #[error("journal migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),

    #[error("journal write failed: {0}")]
    JournalWrite(String),

    #[error("journal file {path} is not usable: {reason}")]
    JournalFile { path: String, reason: String },

    /// A PostgreSQL journal that cannot be used; `target` is the URL with its password hidden.
    #[error("journal database {target} is not usable: {reason}")]
    JournalDatabase { target: String, reason: String },

    /// A journal row that does not read as what it must be (a spec epoch whose spec does not
    /// parse): named by its table and key, never skipped.
    #[error("journal row {row} is unreadable: {reason}")]
    JournalRow { row: String, reason: String },

    #[error("serialization error: {0}")]
    Serialization(#[from] serde_json::Error),

    /// This process does not lead (any more) at the instant it was about to write: nothing was
    /// sent or journaled.
    #[error("not the leader: refused {0}")]
    NotLeader(String),
}

/// `Result` with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What kind of error, as a bounded label: the metric `eru_reconcile_errors_total{category}` and
/// Event reasons carry it, never an error's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Category {
    /// The API server refused a write that raced another (409): retried soon.
    Conflict,
    NotFound,
    Forbidden,
    /// The API server refused the object (422).
    Invalid,
    /// Any other answer of (or failure to reach) the API server.
    Kube,
    Journal,
    Serialization,
    /// This process does not lead (any more): nothing was written.
    NotLeader,
}

impl Category {
    /// Its label value.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl Error {
    /// Its bounded category, for metrics and Events; never error text.
    pub fn category(&self) -> Category {
        match self {
            Error::Kube(kube::Error::Api(status)) if status.code == 409 => Category::Conflict,
            Error::Kube(kube::Error::Api(status)) if status.code == 404 => Category::NotFound,
            Error::Kube(kube::Error::Api(status)) if status.code == 403 => Category::Forbidden,
            Error::Kube(kube::Error::Api(status)) if status.code == 422 => Category::Invalid,
            // refused by the leader-only layer before it was sent
            Error::Kube(kube::Error::Service(e)) if e.is::<Error>() => Category::NotLeader,
            Error::Kube(_) => Category::Kube,
            Error::Journal(_)
            | Error::Migrate(_)
            | Error::JournalWrite(_)
            | Error::JournalFile { .. }
            | Error::JournalDatabase { .. }
            | Error::JournalRow { .. } => Category::Journal,
            Error::Serialization(_) => Category::Serialization,
            Error::NotLeader(_) => Category::NotLeader,
        }
    }
}
