//! What the offline and remote commands (`history`, `audit`) share besides the queries
//! themselves: times given as durations ([`when`]), a running operator's HTTP API as the source
//! of the answers ([`remote`]), and how the binary is called (`eru-operator`, or `kubectl eru`
//! through a `kubectl-eru` link on `PATH`).

pub mod clusters;
pub mod contexts;
pub mod remote;
pub mod resume;
pub mod run_now;
pub mod when;

use std::{ffi::OsStr, path::Path};

/// The name kubectl looks for on `PATH` to run `kubectl eru …`.
pub const KUBECTL_PLUGIN: &str = "kubectl-eru";

/// How the binary was called, for its usage and help texts: `kubectl eru` when `argv0` is (a link
/// named) `kubectl-eru`, as kubectl runs its plugins; else `eru-operator`.
pub fn program_name(argv0: Option<&OsStr>) -> &'static str {
    let file = argv0
        .map(Path::new)
        .and_then(Path::file_name)
        .and_then(OsStr::to_str)
        .unwrap_or_default();
    // `kubectl-eru`, and `kubectl-eru.exe`
    if file == KUBECTL_PLUGIN || file.strip_suffix(".exe") == Some(KUBECTL_PLUGIN) {
        "kubectl eru"
    } else {
        "eru-operator"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_runs_the_plugin_by_its_file_name() {
        assert_eq!(
            program_name(Some(OsStr::new("/usr/local/bin/kubectl-eru"))),
            "kubectl eru"
        );
        assert_eq!(program_name(Some(OsStr::new("kubectl-eru"))), "kubectl eru");
        assert_eq!(program_name(Some(OsStr::new("kubectl-eru.exe"))), "kubectl eru");
        assert_eq!(
            program_name(Some(OsStr::new("./target/debug/eru-operator"))),
            "eru-operator"
        );
        assert_eq!(program_name(Some(OsStr::new("kubectl-eru-old"))), "eru-operator");
        assert_eq!(program_name(None), "eru-operator");
    }
}
