use super::*;

fn refused<T: DeserializeOwned + fmt::Debug>(query: &str) -> String {
    match parse::<T>(query) {
        Err(QueryError::Invalid(message)) => message,
        other => panic!("{query}: expected a refusal, got {other:?}"),
    }
}

#[test]
fn values_inside_the_rules_parse() {
    let p: HistoryParams = parse(
        "namespace=prod-1&name=web.v2&target=web&outcome=in_progress\
         &since=2026-11-22T04:00:00%2B01:00&until=2026-11-23t00:00:00.5z&limit=1000&cursor=h2a",
    )
    .unwrap();
    assert_eq!(p.namespace, Some(Namespace("prod-1".into())));
    assert_eq!(p.outcome, Some(Outcome::InProgress));
    assert_eq!(p.since.unwrap().0.to_rfc3339(), "2026-11-22T03:00:00+00:00");
    assert_eq!(p.limit, Some(Limit(1000)));
    assert_eq!(p.cursor.unwrap().before, 42);
    assert_eq!(Cursor::<Restarts>::new(42).to_string(), "h2a");
}

#[test]
fn values_outside_the_rules_are_refused_with_the_parameter_named() {
    for (query, expect) in [
        ("namespace=", "namespace: must not be empty"),
        ("namespace=Prod", "namespace: must be a Kubernetes namespace"),
        ("namespace=a.b", "namespace: must be"),
        ("name=-web", "name: must be a Kubernetes object name"),
        ("outcome=exploded", "outcome: unknown variant"),
        ("outcome=", "outcome: unknown variant"),
        ("since=yesterday", "since: must be an RFC 3339 time"),
        ("since=2026-11-22 03:00:00Z", "since: must be"),
        ("until=2026-13-01T00:00:00Z", "until: must be"),
        ("limit=0", "limit: must be an integer from 1 to 1000"),
        ("limit=1001", "limit: must be"),
        ("limit=+5", "limit: must be"),
        ("limit=", "limit: must be"),
        ("cursor=t2a", "cursor: is not a cursor of this listing"),
        ("cursor=h", "cursor: is not"),
        ("cursor=h1234567890abcdef", "cursor: is not"),
        ("colour=blue", "unknown field `colour`"),
        ("kind=Eru", "unknown field `kind`"),
        ("name=a&name=b", "duplicate field `name`"),
    ] {
        let message = refused::<HistoryParams>(query);
        assert!(message.starts_with(expect), "{query}: {message}");
    }
    assert!(refused::<MissedParams>("reason=bored").starts_with("reason: unknown variant"));
    assert!(refused::<TransitionParams>("kind=Deployment").starts_with("kind: unknown variant"));
    let long = "a".repeat(254);
    assert!(refused::<HistoryParams>(&format!("name={long}")).starts_with("name: must be"));
    parse::<HistoryParams>(&format!("name={}", &long[..253])).unwrap();
}

#[test]
fn the_patterns_are_the_checks() {
    // The document's patterns are what the parser runs, so a value matches one exactly
    // when it parses: checked on both sides of each rule.
    for (value, ok) in [
        ("a", true),
        ("a-b", true),
        ("a-", false),
        ("A", false),
        ("a.b", true),
    ] {
        assert_eq!(ObjectName::try_from(value.to_string()).is_ok(), ok, "{value}");
        assert_eq!(compile(ObjectName::PATTERN).is_match(value), ok, "{value}");
    }
    for (value, ok) in [
        ("web", true),
        ("StatefulSet/web", true),
        ("DaemonSet/agent.v2", true),
        ("Deployment/web", false),
        ("statefulset/web", false),
        ("StatefulSet/", false),
        ("StatefulSet/Web", false),
        ("/web", false),
    ] {
        assert_eq!(TargetName::try_from(value.to_string()).is_ok(), ok, "{value}");
        assert_eq!(compile(TargetName::PATTERN).is_match(value), ok, "{value}");
    }
    for (value, ok) in [
        ("4545e2a8-85b6-4c1d-a08d-0ec8a2a05ba4", true),
        ("4545E2A8-85B6-4C1D-A08D-0EC8A2A05BA4", false),
        ("4545e2a8-85b6-4c1d-a08d-0ec8a2a05ba", false),
        ("4545e2a885b64c1da08d0ec8a2a05ba4", false),
        ("web", false),
    ] {
        assert_eq!(Uid::try_from(value.to_string()).is_ok(), ok, "{value}");
        assert_eq!(compile(Uid::PATTERN).is_match(value), ok, "{value}");
    }
    assert!(refused::<SlotParams>("uid=web").starts_with("uid: must be an object's uid"));
    assert!(
        refused::<TransitionParams>("uid=4545e2a8-85b6-4c1d-a08d-0ec8a2a05ba4")
            .contains("unknown field `uid`")
    );
    assert!(compile(&Cursor::<Slots>::pattern()).is_match("m0"));
    assert!(Cursor::<Slots>::try_from("m0".to_string()).is_ok());
}

#[test]
fn vocabularies_are_listed() {
    assert_eq!(
        vocabulary::<Outcome>(),
        ["in_progress", "succeeded", "failed", "abandoned", "dry_run"]
    );
    assert_eq!(vocabulary::<Kind>(), ["Eru", "PodSet", "Memcached"]);
    assert_eq!(wire_name(&Reason::OperatorDown), "operator_down");
}

#[test]
fn the_cli_builds_what_the_server_parses() {
    let q = query_string([
        ("name", Some("web")),
        ("since", Some("2026-11-22T03:00:00+01:00")),
        ("limit", None),
    ]);
    let p: HistoryParams = parse(&q).unwrap();
    assert_eq!(p.name, Some(ObjectName("web".into())));
    assert_eq!(p.since.unwrap().0.to_rfc3339(), "2026-11-22T02:00:00+00:00");
    assert_eq!(p.limit, None);
}
