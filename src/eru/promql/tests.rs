use super::*;

/// `query` confined to `shop`.
fn shop(query: &str) -> String {
    confine(query, "shop").unwrap_or_else(|e| panic!("{query}: {e}"))
}

#[test]
fn another_namespace_or_none_becomes_the_erus_own() {
    assert_eq!(
        shop(r#"max(container_memory_working_set_bytes{namespace="payments"})"#),
        r#"max(container_memory_working_set_bytes{namespace="shop"})"#
    );
    assert_eq!(
        shop("max(tenant_value)"),
        r#"max(tenant_value{namespace="shop"})"#
    );
    // every kind of matcher on the label goes, whatever its operator, and the label quoted
    assert_eq!(
        shop(r#"x{namespace=~".+",job="a",namespace!="a",namespace!~"b|c"}"#),
        r#"x{job="a",namespace="shop"}"#
    );
    assert_eq!(shop(r#"x{"namespace"="b"}"#), r#"x{namespace="shop"}"#);
    assert_eq!(
        shop(r#"x{job="a",app="b"}"#),
        r#"x{app="b",job="a",namespace="shop"}"#
    );
    assert_eq!(
        shop(r#"{__name__=~".+"}"#),
        r#"{__name__=~".+",namespace="shop"}"#
    );
    // a label that only looks like it is left alone
    assert_eq!(
        shop(r#"x{Namespace="b",namespace_x="c"}"#),
        r#"x{Namespace="b",namespace="shop",namespace_x="c"}"#
    );
}

#[test]
fn selectors_at_every_depth_are_confined() {
    assert_eq!(
        shop(
            r#"sum by (pod) (rate(x{namespace=~".+",job="a"}[5m])) / on(pod) group_left max(y{namespace!="a"})"#
        ),
        r#"sum by (pod) (rate(x{job="a",namespace="shop"}[5m])) / on (pod) group_left () max(y{namespace="shop"})"#
    );
    assert_eq!(
        shop("max_over_time(max(x)[1h:5m] offset 5m)"),
        r#"max_over_time(max(x{namespace="shop"})[1h:5m] offset 5m)"#,
        "a subquery"
    );
    assert_eq!(
        shop(r#"max(max by (pod) (sum without (c) (x{namespace="b"})))"#),
        r#"max(max by (pod) (sum without (c) (x{namespace="shop"})))"#,
        "nested aggregations"
    );
    // an aggregation's parameter is an expression too (promql-parser's walk_expr skips it)
    assert_eq!(
        shop(r#"topk(scalar(max(y{namespace="b"})), x)"#),
        r#"topk(scalar(max(y{namespace="shop"})), x{namespace="shop"})"#
    );
    assert_eq!(
        shop(r#"(x{namespace="b"} or -y) and on() (z > bool 0.5)"#),
        r#"(x{namespace="shop"} or -y{namespace="shop"}) and on () (z{namespace="shop"} > bool 0.5)"#
    );
    assert_eq!(
        shop("histogram_quantile(0.9, sum by (le) (rate(h_bucket[5m])))"),
        r#"histogram_quantile(0.9, sum by (le) (rate(h_bucket{namespace="shop"}[5m])))"#
    );
}

#[test]
fn modifiers_and_strings_are_kept() {
    assert_eq!(
        shop("x @ 1700000000 offset 1h"),
        r#"x{namespace="shop"} @ 1700000000.000 offset 1h"#
    );
    assert_eq!(shop("x[5m] @ end()"), r#"x{namespace="shop"}[5m] @ end()"#);
    // a string literal that spells a matcher is a string, not a selector
    assert_eq!(
        shop(r#"label_replace(x, "namespace", "namespace=\"b\"", "", "")"#),
        r#"label_replace(x{namespace="shop"}, "namespace", "namespace=\"b\"", "", "")"#
    );
    assert_eq!(
        shop(r#"count_values("namespace", x)"#),
        r#"count_values("namespace", x{namespace="shop"})"#
    );
    assert_eq!(
        shop(r#"x{a="\\\n\""}"#),
        r#"x{a="\\\n\"",namespace="shop"}"#,
        "escapes"
    );
}

#[test]
fn queries_without_selectors_are_sent_as_they_are() {
    assert_eq!(shop("vector(1)"), "vector(1)");
    assert_eq!(shop("0.5 * 2"), "0.5 * 2");
    assert_eq!(shop("time()"), "time()");
}

#[test]
fn what_cannot_be_confined_is_refused_with_why() {
    let refused = |query: &str| confine(query, "shop").unwrap_err();
    assert!(
        refused("max(").contains("does not parse as PromQL"),
        "{}",
        refused("max(")
    );
    assert!(refused("").contains("does not parse"));
    assert!(refused(r#"x{a="1" or b="2"}"#).contains("`or` between its matchers"));
    assert!(refused(r#"info(x, {k8s_cluster_name=~".+"})"#).contains("target_info"));
    let e = need_query("max(x", "shop", "web").unwrap_err();
    assert!(
        e.starts_with("need.query cannot be confined to namespace shop: "),
        "{e}"
    );
}

#[test]
fn namespace_and_target_are_substituted_before_the_rewrite() {
    assert_eq!(
        need_query(
            r#"max(mem{namespace="$namespace",pod=~"$target-.+"})"#,
            "shop",
            "web"
        )
        .unwrap(),
        r#"max(mem{namespace="shop",pod=~"web-.+"})"#
    );
    // a $namespace written elsewhere is still substituted, and the selector still confined
    assert_eq!(
        need_query(r#"max(mem{ns="$namespace"})"#, "shop", "web").unwrap(),
        r#"max(mem{namespace="shop",ns="shop"})"#
    );
}

#[test]
fn a_confined_selector_has_one_equal_namespace_matcher() {
    let selector = |query: &str| match parser::parse(query).unwrap() {
        Expr::VectorSelector(s) => s,
        other => panic!("{other:?}"),
    };
    assert!(confined(&selector(r#"x{namespace="shop"}"#), "shop"));
    assert!(!confined(&selector("x"), "shop"));
    assert!(!confined(&selector(r#"x{namespace="bank"}"#), "shop"));
    assert!(!confined(&selector(r#"x{namespace=~"shop"}"#), "shop"));
    assert!(!confined(
        &selector(r#"x{namespace="shop",namespace="bank"}"#),
        "shop"
    ));
}
