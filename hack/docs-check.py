#!/usr/bin/env python3
"""Checks the docs (hack/test.sh runs it; no network, no cluster):

- every table row has as many cells as its header;
- every relative link in README.md, docs/*.md and charts/*/README.md resolves: the file or folder
  exists, and a #fragment names a heading of the target page (GitHub's anchors);
- the README links every page of docs/;
- every alert rule of deploy/alerts/eru-operator.rules.yaml has summary, description and a
  runbook_url whose fragment is a heading of docs/runbooks.md, all under one base that ends in
  docs/runbooks.md (the chart's prometheusRule.runbookBaseURL replaces that base), and
  docs/runbooks.md has a section named after each alert.

Run: python3 hack/docs-check.py
"""
import pathlib
import re
import sys
import urllib.parse

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
failures = []


def fail(message):
    failures.append(message)


def prose_lines(text):
    """The lines outside fenced code blocks."""
    fenced = False
    for line in text.splitlines():
        if re.match(r"^\s*(```|~~~)", line):
            fenced = not fenced
            continue
        if not fenced:
            yield line


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    """Every anchor of a markdown page (duplicates get -1, -2, … as on GitHub)."""
    seen = {}
    result = set()
    for line in prose_lines(path.read_text()):
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else f"{base}-{n}")
    return result


LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")


def links(path):
    for number, line in enumerate(prose_lines(path.read_text()), 1):
        line = re.sub(r"`[^`]*`", "", line)  # inline code is not a link
        for m in LINK.finditer(line):
            yield number, m.group(1)


def check_links(page):
    rel = page.relative_to(ROOT)
    for number, target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: …: not checked offline
            continue
        path_part, _, fragment = target.partition("#")
        dest = (page.parent / urllib.parse.unquote(path_part)).resolve() if path_part else page
        if not dest.exists():
            fail(f"{rel}: link to {target}: {path_part} does not exist")
            continue
        if ROOT not in dest.parents and dest != ROOT:
            fail(f"{rel}: link to {target} leaves the repository")
            continue
        if fragment:
            if dest.is_dir() or dest.suffix != ".md":
                fail(f"{rel}: link to {target}: a fragment on a file that is not markdown")
            elif fragment not in anchors(dest):
                fail(f"{rel}: link to {target}: no heading #{fragment} in {dest.relative_to(ROOT)}")


def check_tables(page):
    """Every row of a table has as many cells as its header (an unescaped | in a cell breaks it)."""
    rel = page.relative_to(ROOT)
    header = None
    for number, line in enumerate(prose_lines(page.read_text()), 1):
        if not line.startswith("|"):
            header = None
            continue
        cells = len(re.split(r"(?<!\\)\|", line)) - 2
        if header is None:
            header = cells
        elif cells != header:
            fail(f"{rel}: a table row has {cells} cells, its header {header} (escape | as \\|): {line[:80]}")


def check_readme_links_docs():
    readme_targets = {t.partition("#")[0] for _, t in links(ROOT / "README.md")}
    for page in sorted((ROOT / "docs").glob("*.md")):
        if f"docs/{page.name}" not in readme_targets:
            fail(f"README.md does not link docs/{page.name}")


def check_runbooks():
    rules_path = ROOT / "deploy/alerts/eru-operator.rules.yaml"
    runbooks = ROOT / "docs/runbooks.md"
    sections = anchors(runbooks)
    headings = {
        m.group(1).strip()
        for line in prose_lines(runbooks.read_text())
        if (m := re.match(r"^##\s+(.*)$", line))
    }
    bases = set()
    count = 0
    for group in yaml.safe_load(rules_path.read_text())["groups"]:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            count += 1
            alert = rule["alert"]
            notes = rule.get("annotations", {})
            for key in ("summary", "description", "runbook_url"):
                if not notes.get(key):
                    fail(f"{rules_path.name}: {alert} has no {key}")
            url = notes.get("runbook_url", "")
            parsed = urllib.parse.urlsplit(url)
            if not url:
                continue
            if parsed.scheme not in ("http", "https") or not parsed.path.endswith("docs/runbooks.md"):
                fail(f"{alert}: runbook_url {url} is not an http(s) URL of docs/runbooks.md")
            bases.add(url.partition("#")[0])
            if not parsed.fragment:
                fail(f"{alert}: runbook_url {url} has no #anchor")
            elif parsed.fragment not in sections:
                fail(f"{alert}: runbook_url anchor #{parsed.fragment} is not a heading of docs/runbooks.md")
            if alert not in headings:
                fail(f"docs/runbooks.md has no section '## {alert}'")
    if len(bases) > 1:
        fail(f"runbook_url bases differ: {sorted(bases)}")
    if count == 0:
        fail(f"no alert rules found in {rules_path}")
    return count


pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("charts/*/README.md"))]
for page in pages:
    check_links(page)
    check_tables(page)
check_readme_links_docs()
alerts = check_runbooks()

if failures:
    print("docs check failed:", *failures, sep="\n  ", file=sys.stderr)
    sys.exit(1)
print(f"docs check: {len(pages)} pages, their links resolve and tables hold; {alerts} alerts, each with its runbook section")
