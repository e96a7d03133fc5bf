//! An Eru's `need.query`, confined to the Eru's namespace before it is sent: the operator asks
//! Prometheus with its own credentials, so a query that named another namespace (or none) would
//! make it a confused deputy, answering a tenant with another tenant's data (in its slots' notes,
//! status, `/history` and Events). As prom-label-proxy does, the query is parsed (GreptimeDB's
//! `promql-parser`, never string edits), every vector and matrix selector at any depth loses its
//! matchers on `namespace` and gains `namespace="<the Eru's namespace>"`, and the tree is printed
//! back. What cannot be confined is refused, and the refusal says why: a query that does not
//! parse, one whose printed text does not parse back to the same confined tree, and the few
//! constructs that reach series no selector names.
//!
//! Pure: the spec's validation (`pass/observe.rs`) and the gate's request (`gates.rs`) both call
//! [`need_query`], so what is validated is what is sent.

use promql_parser::{
    label::{MatchOp, Matcher},
    parser::{self, Expr, VectorSelector},
};

/// The label every selector is confined by: the one kube-state-metrics, cAdvisor and the
/// Prometheus Operator's scrape configurations give a namespaced series.
pub const LABEL: &str = "namespace";

/// `query` with `$namespace` and `$target` substituted (the Eru's namespace and its target's
/// name), confined to `namespace`: the text to send, or why it cannot be.
pub fn need_query(query: &str, namespace: &str, target: &str) -> Result<String, String> {
    let query = query.replace("$namespace", namespace).replace("$target", target);
    confine(&query, namespace)
        .map_err(|why| format!("need.query cannot be confined to namespace {namespace}: {why}"))
}

/// `query` with every selector confined to `namespace`, printed; verified by parsing the text
/// again: it must give the same tree, every selector of it confined.
pub fn confine(query: &str, namespace: &str) -> Result<String, String> {
    let mut tree = parser::parse(query).map_err(|e| format!("it does not parse as PromQL: {e}"))?;
    confine_expr(&mut tree, namespace)?;
    let printed = tree.to_string();
    let again = parser::parse(&printed)
        .map_err(|e| format!("its rewritten text does not parse again ({e}): {printed}"))?;
    // NaN literals compare unequal, so a query holding one is refused here: rare, and safe
    if again != tree {
        return Err(format!(
            "its rewritten text does not read back as the same query: {printed}"
        ));
    }
    let mut selectors = Vec::new();
    collect(&again, &mut selectors)?;
    match selectors.iter().all(|s| confined(s, namespace)) {
        true => Ok(printed),
        false => Err(format!(
            "a selector of its rewritten text is not confined: {printed}"
        )),
    }
}

/// Confines every selector under `expr`. The match has no catch-all arm on purpose: a variant
/// a new version of the crate adds must be thought about, not silently passed. (The crate's own
/// `walk_expr` is not used: it skips an aggregation's parameter, `topk(scalar(...), ...)`.)
fn confine_expr(expr: &mut Expr, namespace: &str) -> Result<(), String> {
    match expr {
        Expr::Aggregate(aggregate) => {
            if let Some(param) = &mut aggregate.param {
                confine_expr(param, namespace)?;
            }
            confine_expr(&mut aggregate.expr, namespace)
        }
        Expr::Unary(unary) => confine_expr(&mut unary.expr, namespace),
        Expr::Binary(binary) => {
            confine_expr(&mut binary.lhs, namespace)?;
            confine_expr(&mut binary.rhs, namespace)
        }
        Expr::Paren(paren) => confine_expr(&mut paren.expr, namespace),
        Expr::Subquery(subquery) => confine_expr(&mut subquery.expr, namespace),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) => Ok(()),
        Expr::VectorSelector(selector) => confine_selector(selector, namespace),
        Expr::MatrixSelector(matrix) => confine_selector(&mut matrix.vs, namespace),
        Expr::Call(call) => {
            refused_function(call.func.name)?;
            (call.args.args.iter_mut()).try_for_each(|arg| confine_expr(arg, namespace))
        }
        Expr::Extension(_) => Err("it holds an extension node no PromQL text produces".into()),
    }
}

/// Functions that read series no selector of the query names: `info()` joins `target_info`
/// series found by the input's identifying labels, whatever their namespace.
fn refused_function(name: &str) -> Result<(), String> {
    match name {
        "info" => Err("info() reads target_info series outside the query's selectors".into()),
        _ => Ok(()),
    }
}

/// One selector: its matchers on [`LABEL`] replaced by `LABEL="namespace"`. A selector with
/// `or` groups (an extension Prometheus does not accept) is refused rather than confined group by
/// group.
fn confine_selector(selector: &mut VectorSelector, namespace: &str) -> Result<(), String> {
    if !selector.matchers.or_matchers.is_empty() {
        return Err("a selector with `or` between its matchers is not PromQL Prometheus accepts".into());
    }
    let matchers = &mut selector.matchers.matchers;
    matchers.retain(|m| m.name != LABEL);
    matchers.push(Matcher::new(MatchOp::Equal, LABEL, namespace));
    // in the order the crate prints them (sorted as text), so the printed query parses back to
    // this very tree; matchers are a conjunction, their order means nothing
    matchers.sort_by_cached_key(|m| m.to_string());
    Ok(())
}

/// Whether `selector` selects `namespace`'s series only: one matcher on [`LABEL`], equal to it.
fn confined(selector: &VectorSelector, namespace: &str) -> bool {
    let on_label: Vec<&Matcher> = (selector.matchers.matchers.iter())
        .chain(selector.matchers.or_matchers.iter().flatten())
        .filter(|m| m.name == LABEL)
        .collect();
    selector.matchers.or_matchers.is_empty()
        && matches!(on_label[..], [m] if m.op == MatchOp::Equal && m.value == namespace)
}

/// Every selector under `expr` (a matrix's as its vector selector), as the check after the
/// rewrite reads them: a walk of its own, not the rewrite's.
fn collect<'a>(expr: &'a Expr, into: &mut Vec<&'a VectorSelector>) -> Result<(), String> {
    match expr {
        Expr::Aggregate(aggregate) => {
            if let Some(param) = &aggregate.param {
                collect(param, into)?;
            }
            collect(&aggregate.expr, into)
        }
        Expr::Unary(unary) => collect(&unary.expr, into),
        Expr::Binary(binary) => collect(&binary.lhs, into).and_then(|_| collect(&binary.rhs, into)),
        Expr::Paren(paren) => collect(&paren.expr, into),
        Expr::Subquery(subquery) => collect(&subquery.expr, into),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) => Ok(()),
        Expr::VectorSelector(selector) => {
            into.push(selector);
            Ok(())
        }
        Expr::MatrixSelector(matrix) => {
            into.push(&matrix.vs);
            Ok(())
        }
        Expr::Call(call) => call.args.args.iter().try_for_each(|arg| collect(arg, into)),
        Expr::Extension(_) => Err("it holds an extension node no PromQL text produces".into()),
    }
}

#[cfg(test)]
mod tests;
