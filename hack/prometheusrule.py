#!/usr/bin/env python3
"""The alert rules' generator and checks. deploy/alerts/eru-operator.rules.yaml is the source (the
rules promtool tests); every expression selects the operator's series with job="eru-operator".

  python3 hack/prometheusrule.py
      writes deploy/alerts/prometheusrule.yaml: the same groups as a PrometheusRule, so the
      Prometheus Operator gets exactly the rules promtool tests
  python3 hack/prometheusrule.py [--job JOB] [--cluster CLUSTER] [--runbook-base URL]
                                 (--rules FILE | --prometheusrule FILE)
      the rules with the selector job="JOB" (and cluster="CLUSTER", every aggregation then keeping
      `cluster`) and the runbook links under URL (…/runbooks.md), as a rules file or a
      PrometheusRule; the Helm chart makes the same from serviceMonitor.job, prometheusRule.cluster
      and prometheusRule.runbookBaseURL (hack/chart-check.sh compares them)
  python3 hack/prometheusrule.py --check
      fails unless every vector selector of every expression carries the job selector, every
      alert has a `for:`, severity, summary, description and runbook_url
"""
import argparse
import pathlib
import re
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
RULES = ROOT / "deploy" / "alerts" / "eru-operator.rules.yaml"
SELECTOR = 'job="eru-operator"'
# the operator's series (eru_*, the process_* series, `up` of its job): a name not followed by `{`
# would select every job's
METRIC = re.compile(r"\b(eru_[a-z_]+|process_[a-z_]+|up)\b(\{)?")


def load():
    return yaml.safe_load(RULES.read_text())["groups"]


def configure(groups, job="eru-operator", cluster="", runbook_base=""):
    """`groups` with the selector and runbook base replaced (only in `expr` and `runbook_url`)."""
    selector = f'job="{job}"' + (f', cluster="{cluster}"' if cluster else "")
    for group in groups:
        for rule in group["rules"]:
            expr = rule["expr"].replace(SELECTOR, selector)
            if cluster:
                expr = expr.replace("by (", "by (cluster, ")
            rule["expr"] = expr
            url = rule.get("annotations", {}).get("runbook_url")
            if url and runbook_base:
                rule["annotations"]["runbook_url"] = runbook_base + "#" + url.partition("#")[2]
    return groups


def check(groups):
    problems = []
    for group in groups:
        for rule in group["rules"]:
            name, expr = rule.get("alert", rule.get("record")), rule["expr"]
            for match in METRIC.finditer(expr):
                if not expr.startswith(SELECTOR, match.end()):
                    problems.append(f"{name}: {match.group(1)} without {{{SELECTOR}, …}}: {expr}")
            if "alert" not in rule:
                continue
            if not rule.get("for"):
                problems.append(f"{name}: no for:")
            if rule.get("labels", {}).get("severity") not in ("warning", "critical", "info"):
                problems.append(f"{name}: no severity label")
            for key in ("summary", "description", "runbook_url"):
                if not rule.get("annotations", {}).get(key):
                    problems.append(f"{name}: no {key} annotation")
            for key, text in rule.get("annotations", {}).items():
                if SELECTOR in text or "by (" in text:
                    problems.append(f"{name}: annotation {key} holds text the selector options replace")
    return problems


def prometheusrule(groups):
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "eru-operator", "namespace": "eru-system", "labels": {"app.kubernetes.io/name": "eru-operator"}},
        "spec": {"groups": groups},
    }


def dump(value):
    return yaml.safe_dump(value, sort_keys=False, width=1000)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--job", default="eru-operator")
    parser.add_argument("--cluster", default="")
    parser.add_argument("--runbook-base", default="")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--rules", type=pathlib.Path)
    out.add_argument("--prometheusrule", type=pathlib.Path)
    out.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.check:
        problems = check(load())
        if problems:
            print("alert rules:", *problems, sep="\n  ", file=sys.stderr)
            sys.exit(1)
        print(f"alert rules: every selector carries {SELECTOR}; every alert has for:, severity, summary, description, runbook_url")
        return
    for value in (args.job, args.cluster):
        if not re.fullmatch(r"[A-Za-z0-9_.:/-]*", value):
            sys.exit(f"not a plain label value: {value!r}")
    groups = configure(load(), args.job, args.cluster, args.runbook_base)
    if args.rules:
        args.rules.write_text(f"# hack/prometheusrule.py --job {args.job} --cluster '{args.cluster}' from deploy/alerts/eru-operator.rules.yaml\n" + dump({"groups": groups}))
        print("wrote", args.rules)
    else:
        target = args.prometheusrule or ROOT / "deploy" / "alerts" / "prometheusrule.yaml"
        header = "# Generated by hack/prometheusrule.py from eru-operator.rules.yaml; do not edit.\n"
        target.write_text(header + dump(prometheusrule(groups)))
        print("wrote", target)


if __name__ == "__main__":
    main()
