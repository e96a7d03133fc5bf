//! Test-only failpoints, armed by the environment variable `ERU_FAILPOINT` (docs/development.md):
//! the e2e tests stop or hang the operator at an exact point to prove what a crash or a freeze
//! there leaves behind. Unarmed, each costs one environment read.

use std::sync::atomic::{AtomicBool, Ordering};

use tracing::warn;

/// The variable naming the armed failpoint.
pub const ENV: &str = "ERU_FAILPOINT";

/// A restart patch decided and journaled, just before it is sent.
pub const STOP_BEFORE_RESTART_PATCH: &str = "stop-before-restart-patch";

/// A journal batch holding records, after its statements and the leadership deadline's check,
/// just before its fence is read and it commits.
pub const STOP_BEFORE_JOURNAL_COMMIT: &str = "stop-before-journal-commit";

/// Whether `name` is the armed failpoint.
pub fn armed(name: &str) -> bool {
    std::env::var(ENV).as_deref() == Ok(name)
}

/// The first time this process passes the armed failpoint `name`, it stops itself (SIGSTOP)
/// until continued (SIGCONT): a freeze at exactly that point, the renew loop and every other task
/// frozen with it.
pub fn stop_once(name: &str) {
    static STOPPED: AtomicBool = AtomicBool::new(false);
    if armed(name) && !STOPPED.swap(true, Ordering::SeqCst) {
        warn!("failpoint {name}: stopping this process until SIGCONT");
        // SAFETY: raise(3) has no preconditions; the process stops here until continued
        unsafe {
            libc::raise(libc::SIGSTOP);
        }
        warn!("failpoint {name}: continued");
    }
}
