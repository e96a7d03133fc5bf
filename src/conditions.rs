//! Status conditions, built the way Kubernetes expects: `lastTransitionTime` moves only when the
//! condition's status changes.

use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};
use kube::Resource;

/// A condition of `obj`, keeping the previous `lastTransitionTime` when the status is unchanged.
pub fn condition(
    previous: &[Condition],
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    obj: &impl Resource,
) -> Condition {
    let status = if status { "True" } else { "False" };
    let since = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| Time(Timestamp::now()));
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.chars().take(1024).collect(),
        last_transition_time: since,
        observed_generation: obj.meta().generation,
    }
}
