//! One Eru pass in the cluster and the journal, a step per module, in the order of the runtime's
//! pass ([`crate::runtime::pass`]): [`reconcile`] (the controller and the steps) → [`observe`]
//! (caches and journal into the core's [`Observed`](super::core::observed::Observed)) → the
//! core's plan → [`commit`] (the journal) → [`act`] (the restart patch, the fleet, Events) →
//! [`status`]; [`deleted`] handles Erus gone from the cluster, [`context`] is what every pass
//! shares, [`journal_memo`] what passes remember of the journal so that they read less of it.

pub mod act;
pub mod commit;
pub mod context;
pub mod deleted;
pub mod journal_memo;
pub mod observe;
pub mod reconcile;
pub mod status;
