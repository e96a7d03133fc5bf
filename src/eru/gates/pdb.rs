//! The PodDisruptionBudget gate (opt in): the budgets of the target's namespace whose selector
//! matches the target's pod template labels, closed while one allows no disruption.

use super::*;

impl Gatekeeper {
    /// The PodDisruptionBudget gate of the target (`kind`, `name`) in `namespace`: closed with
    /// the budgets at zero named, open (`None`), or unknown.
    pub(super) async fn budget_gate(
        &self,
        namespace: &str,
        (kind, name): (TargetKind, &str),
        cluster_wide: bool,
    ) -> Result<Option<Answer>, String> {
        let answer = self.budgets_at_zero(namespace, kind, name).await;
        self.count(
            GateKind::PodDisruptionBudgets,
            answer.as_ref().map(|b| !b.is_empty()),
        );
        let budgets = answer.map_err(|error| format!("reading PodDisruptionBudgets failed: {error}"))?;
        if budgets.is_empty() {
            return Ok(None);
        }
        let scope = if cluster_wide { " (cluster-wide gate)" } else { "" };
        Ok(Some(Answer::Closed {
            reason: Reason::PdbBlocked,
            note: format!(
                "PodDisruptionBudgets allowing no disruption{scope}: {}",
                some_of(&budgets, NAMED)
            ),
        }))
    }

    /// The PodDisruptionBudgets of `namespace` selecting the pods of the target (`kind`, `name`:
    /// its pod template's labels) that allow no disruption now, each as `name (H healthy, D
    /// desired)`. A budget its controller has not counted since its last change is an unknown
    /// answer, not an open one.
    pub(super) async fn budgets_at_zero(
        &self,
        namespace: &str,
        kind: TargetKind,
        name: &str,
    ) -> Result<Vec<String>, String> {
        let key = (namespace.to_string(), kind, name.to_string());
        let ttl = self.options.cache_ttl;
        if let Some(answer) = self.budgets.get(&key, ttl) {
            return answer;
        }
        let answer = self.read_budgets(namespace, kind, name).await;
        self.budgets.keep(key, answer, ttl)
    }

    pub(super) async fn read_budgets(
        &self,
        namespace: &str,
        kind: TargetKind,
        name: &str,
    ) -> Result<Vec<String>, String> {
        let labels = self.template_labels(namespace, kind, name).await?;
        let api: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), namespace);
        let budgets = api
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let mut at_zero = Vec::new();
        for budget in budgets.items {
            let Some(selector) = budget.spec.as_ref().and_then(|s| s.selector.clone()) else {
                continue; // a budget without a selector selects no pod
            };
            let selector = Selector::try_from(selector).map_err(|e| e.to_string())?;
            if !selector.matches(&labels) {
                continue;
            }
            let budget_name = budget.metadata.name.clone().unwrap_or_default();
            let status = budget.status.as_ref();
            let counted =
                status.and_then(|s| s.observed_generation) >= budget.metadata.generation && status.is_some();
            let Some(status) = status.filter(|_| counted) else {
                return Err(format!("PodDisruptionBudget {budget_name} is not counted yet"));
            };
            if status.disruptions_allowed.unwrap_or(0) <= 0 {
                at_zero.push(format!(
                    "{budget_name} ({} healthy, {} desired)",
                    status.current_healthy.unwrap_or(0),
                    status.desired_healthy.unwrap_or(0)
                ));
            }
        }
        at_zero.sort();
        Ok(at_zero)
    }
}
