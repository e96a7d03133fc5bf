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
}

/// `Result` with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every value [`Error::category`] returns.
pub const CATEGORIES: [&str; 7] = [
    "conflict",
    "not_found",
    "forbidden",
    "invalid",
    "kube",
    "journal",
    "serialization",
];

impl Error {
    /// A fixed label for metrics and Events; never contains error text.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(status)) if status.code == 409 => "conflict",
            Error::Kube(kube::Error::Api(status)) if status.code == 404 => "not_found",
            Error::Kube(kube::Error::Api(status)) if status.code == 403 => "forbidden",
            Error::Kube(kube::Error::Api(status)) if status.code == 422 => "invalid",
            Error::Kube(_) => "kube",
            Error::Journal(_)
            | Error::Migrate(_)
            | Error::JournalWrite(_)
            | Error::JournalFile { .. }
            | Error::JournalDatabase { .. }
            | Error::JournalRow { .. } => "journal",
            Error::Serialization(_) => "serialization",
        }
    }
}
