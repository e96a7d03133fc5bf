#!/usr/bin/env python3
"""Checks the docs (hack/test.sh runs it; no network, no cluster):

- every table row has as many cells as its header;
- every relative link in README.md, CHANGELOG.md, docs/*.md and charts/*/README.md resolves: the file or folder
  exists, and a #fragment names a heading of the target page (GitHub's anchors);
- the README links every page of docs/;
- every alert rule of deploy/alerts/eru-operator.rules.yaml has summary, description and a
  runbook_url whose fragment is a heading of docs/runbooks.md, all under one base that ends in
  docs/runbooks.md (the chart's prometheusRule.runbookBaseURL replaces that base), and
  docs/runbooks.md has a section named after each alert; its summary table lists exactly the
  rules, and the number of rules the README states is the rules file's;
- every flag the docs give an `eru-operator` (or `kubectl eru`) command, in a code block or a
  code span, is in that command's `--help` (hidden aliases are not: docs name what help shows);
  a code span that is a flag alone is a flag of some command, unless FOREIGN says whose it is;
  docs/api.md's table of `run` flags lists every flag of `run --help` and no other, each with the
  environment variable help names;
- every endpoint the docs name (`GET /path`, and the path of a URL to the operator: `$API/…`,
  localhost:8080, localhost:8443) is a route of src/http.rs; every route is in docs/api.md's
  table of endpoints; every route is in the OpenAPI document (`eru-operator openapi`) but the
  pages of PAGES;
- every `curl` of the operator's API in docs/runbooks.md sends the token and verifies the
  certificate (`-H "Authorization: Bearer …"`, `--cacert`; no `-k`), as an installed operator needs;
- docs/eru.md's table of reasons lists exactly the reasons of src/vocab.rs a slot may not be
  restarted for (all but `scheduled`), each once; docs/api.md's table of metrics names exactly
  the metrics src/ registers (outside test code);
- every source path docs/architecture.md and docs/development.md name in a code span
  (`src/…`, `hack/…`, `tests/…`) exists.

The flags and the document come from the binary: `--bin PATH`, else `cargo build` (quiet; in
$CARGO_TARGET_DIR, by default the hack/ scripts' ~/.cache/eru/target, not ./target).

Run: python3 hack/docs-check.py [--bin PATH]
"""
import json
import os
import pathlib
import re
import subprocess
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


NUMBERS = {w: n for n, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen".split())}


def alert_names():
    rules = yaml.safe_load((ROOT / "deploy/alerts/eru-operator.rules.yaml").read_text())
    return [r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r]


def check_alert_counts():
    """The README's number of alert rules, and the runbooks' summary table, against the rules."""
    names = alert_names()
    readme = (ROOT / "README.md").read_text()
    stated = re.findall(r"\b(\w+) alert rules\b", readme, flags=re.I)
    if not stated:
        fail("README.md states no number of alert rules ('The N alert rules')")
    for word in stated:
        n = int(word) if word.isdigit() else NUMBERS.get(word.lower())
        if n is None:
            continue
        if n != len(names):
            fail(f"README.md says {word} alert rules; deploy/alerts/eru-operator.rules.yaml has {len(names)}")
    in_table = re.findall(r"^\| \[(\w+)\]\(#", (ROOT / "docs/runbooks.md").read_text(), flags=re.M)
    if sorted(in_table) != sorted(names):
        fail(f"docs/runbooks.md's summary table lists {sorted(in_table)}; the rules are {sorted(names)}")


# Flags the docs name in a code span of their own that belong to another program.
FOREIGN = {
    "--set": "helm", "--create-namespace": "helm", "--namespace": "helm, kubectl",
    "--values": "helm", "--name": "hack/cluster.sh", "--nodes": "hack/cluster.sh",
    "--test": "cargo", "--features": "cargo", "--ignored": "cargo test", "--bench": "cargo", "--profile": "cargo, hack scripts",
    "--cronjobs": "hack/scale.sh", "--controller-qps": "hack/scale.sh", "--apf-shares": "hack/scale.sh",
    "--keep": "hack/scale.sh", "--paces": "hack/scale.sh",
    "--immediate": "hack/postgres.sh", "--tool": "valgrind", "--node-monitor-grace-period": "kube-controller-manager",
    "--down-seconds": "hack/cluster.sh",
    "--job": "hack/prometheusrule.py", "--cluster": "hack/prometheusrule.py", "--rules": "hack/prometheusrule.py",
    "--prometheusrule": "hack/prometheusrule.py", "--check": "hack/prometheusrule.py",
    "--cacert": "curl", "--connect-to": "curl", "--dry-run": "kubectl", "--type": "kubectl", "--clusterrole": "kubectl",
    "--serviceaccount": "kubectl", "--field-selector": "kubectl", "--server-side": "kubectl",
    "--field-manager": "kubectl", "--force-conflicts": "kubectl",
    "--blocking-pod-selector": "Kured", "--alert-filter-regexp": "Kured", "--prometheus-url": "Kured",
    "--cargo-arg": "cargo-mutants", "--tests": "hack/mutants.sh", "--iterate": "cargo-mutants", "--idle-from-first": "hack/frontier.py", "--five-minutes": "hack/frontier.py", "--override-manager": "kustomize-controller", "--reboot-days": "Kured", "--max-pod-life-time-seconds": "descheduler", "--bin": "hack/docs-check.py", "--self-test": "hack/imports.py",
    "--manage-nodes-with-annotation-selector": "kwok", "--build-arg": "podman", "--pull": "podman",
    "--storage-driver": "podman", "--isolation": "podman", "--ulimit": "podman",
    "--reuse-values": "helm", "--reset-then-reuse-values": "helm", "--take-ownership": "helm",
}


def binary():
    """The eru-operator binary: --bin PATH, else built (quietly) with cargo."""
    if "--bin" in sys.argv:
        return sys.argv[sys.argv.index("--bin") + 1]
    # the target folder the hack/ scripts build in (hack/test.sh), not ./target: run by hand, a
    # second one of many GB would grow beside it
    env = dict(os.environ)
    cache = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    env.setdefault("CARGO_TARGET_DIR", os.path.join(cache, "eru", "target"))
    subprocess.run(["cargo", "build", "--quiet", "--locked", "--bin", "eru-operator"], cwd=ROOT, check=True, env=env)
    meta = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps"], cwd=ROOT,
                                     check=True, capture_output=True, text=True, env=env).stdout)
    return str(pathlib.Path(meta["target_directory"]) / "debug" / "eru-operator")


def run_binary(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ERU_") and k not in ("KUBECONFIG", "POD_NAME")}
    return subprocess.run([BIN, *args], check=True, capture_output=True, text=True, env=env).stdout


def parse_help(text):
    """{flag: env var or None} of a clap --help, short flags included (as -x)."""
    flags = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^\s{2,}(?:-(\w), )?--([a-z0-9-]+)", line)
        if m:
            current = "--" + m.group(2)
            flags[current] = None
            if m.group(1):
                flags["-" + m.group(1)] = None
            continue
        m = re.match(r"^\s{2,}-(\w)(?:,|\s)", line)
        if m:
            flags["-" + m.group(1)] = None
            continue
        m = re.search(r"\[env: (\w+)", line)
        if m and current:
            flags[current] = m.group(1)
    return flags


def commands():
    """{subcommand: {flag: env}} from the binary's help."""
    top = run_binary("--help")
    names = re.findall(r"^  ([a-z][a-z-]*)\s{2,}", top.split("Commands:", 1)[1].split("Options:", 1)[0], flags=re.M)
    return {name: parse_help(run_binary(name, "--help")) for name in names if name != "help"}


def code_texts(text):
    """Each command of a fenced code block (continuation lines joined) and each code span."""
    fenced = False
    pending = ""
    for line in text.splitlines():
        if re.match(r"^\s*(```|~~~)", line):
            fenced = not fenced
            pending = ""
            continue
        if fenced:
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            yield pending + line
            pending = ""
        else:
            yield from re.findall(r"`([^`]+)`", line)


def invocations(code):
    """(subcommand, flags) of each command of a line that runs the binary: `eru-operator`, a path to
    it, `kubectl eru`, `kubectl-eru` or `cargo run --`, first on the command (after a prompt and
    variable assignments)."""
    code = re.sub(r"\s#\s.*$", "", code)  # a shell comment
    for part in re.split(r"\|\||&&|[|;]|\$\(", code):
        tokens = part.replace('"', " ").replace("'", " ").split()
        while tokens and (tokens[0] in ("$", "time", "exec") or re.match(r"^[A-Z_]+=", tokens[0])):
            tokens = tokens[1:]
        if not tokens:
            continue
        first = tokens[0]
        if first in ("eru-operator", "kubectl-eru") or (first.endswith("/eru-operator") and first[0] in "/.~$"):
            starts = 1
        elif first == "kubectl" and tokens[1:2] == ["eru"]:
            starts = 2
        elif first == "cargo" and tokens[1:3] == ["run", "--"]:
            starts = 3
        else:
            continue
        if starts < len(tokens):
            yield tokens[starts], [t.split("=")[0] for t in tokens[starts + 1:] if re.match(r"^--?[a-zA-Z]", t)]


def check_flags(pages):
    cmds = commands()
    every = {flag for flags in cmds.values() for flag in flags}
    checked = 0
    for page in pages:
        rel = page.relative_to(ROOT)
        for code in code_texts(page.read_text()):
            for sub, flags in invocations(code):
                if sub not in cmds:
                    if not sub.startswith("-") and sub not in ("$", "…"):
                        fail(f"{rel}: `{code.strip()[:70]}`: eru-operator has no command {sub}")
                    continue
                for flag in flags:
                    checked += 1
                    if flag not in cmds[sub] and flag not in ("--help", "-h", "--version", "-V"):
                        fail(f"{rel}: `{code.strip()[:70]}`: `eru-operator {sub} --help` has no {flag}")
            m = re.match(r"^(--[a-z0-9-]+?)(\*|-\*)?(?:[ =\[].*)?$", code.strip())
            if m and not code.strip().startswith("-- "):
                flag, glob = m.group(1), m.group(2)
                checked += 1
                known = any(f.startswith(flag) for f in every) if glob else flag in every
                if not known and flag not in FOREIGN:
                    fail(f"{rel}: `{code.strip()[:60]}`: no eru-operator command has {flag} "
                         f"(if it is another program's, add it to FOREIGN in hack/docs-check.py)")
    # docs/api.md's table of `run` flags: every flag of `run --help`, each with its env var
    api = (ROOT / "docs/api.md").read_text()
    section = api.split("### `run` flags", 1)[1].split("\n#", 1)[0]
    table = {}
    for line in section.splitlines():
        m = re.match(r"^\| (?:`-\w`, )?`(--[a-z0-9-]+)[^`]*` \|\s*([^|]*?)\s*\|", line)
        if m:
            table[m.group(1)] = m.group(2).strip().strip("`") or None
    run = {f: e for f, e in cmds["run"].items() if f.startswith("--") and f not in ("--help", "--version")}
    for flag in sorted(set(run) - set(table)):
        fail(f"docs/api.md's `run` flags table lacks {flag} (in `eru-operator run --help`)")
    for flag in sorted(set(table) - set(run)):
        fail(f"docs/api.md's `run` flags table lists {flag}, which `eru-operator run --help` does not")
    for flag in sorted(set(table) & set(run)):
        if table[flag] != run[flag]:
            fail(f"docs/api.md's `run` flags table: {flag} is set by {table[flag]}; help says {run[flag]}")
    return checked


# Routes that are pages for a person or the document itself, not endpoints the document describes.
PAGES = {"/", "/ui", "/ui/eru/{namespace}/{name}", "/openapi.json"}


def check_endpoints(pages):
    routes = set(re.findall(r'\.route\("([^"]+)"', (ROOT / "src/http.rs").read_text()))
    if not routes:
        fail("no .route(\"...\") found in src/http.rs")
    document = set(json.loads(run_binary("openapi"))["paths"])
    for path in sorted(document - routes):
        fail(f"the OpenAPI document has {path}, which src/http.rs does not route")
    for path in sorted(routes - document - PAGES):
        fail(f"src/http.rs routes {path}, which the OpenAPI document lacks (or add it to PAGES)")
    patterns = [re.compile("^" + re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(r)) + "$") for r in routes]

    def routed(path):
        return any(p.match(path) for p in patterns) or path in routes

    named = re.compile(r"GET (/[A-Za-z0-9/{}_.-]*)|(?:\$API|localhost:(?:8080|8443)|127\.0\.0\.1:(?:8080|8443))(/[A-Za-z0-9/{}_.-]*)")
    count = 0
    for page in pages:
        rel = page.relative_to(ROOT)
        for m in named.finditer(page.read_text()):
            path = (m.group(1) or m.group(2)).rstrip(".")
            count += 1
            if not routed(path):
                fail(f"{rel}: names the endpoint {path}, which src/http.rs does not route")
    api = (ROOT / "docs/api.md").read_text()
    section = api.split("### Endpoints", 1)[1].split("\n#", 1)[0]
    listed = set(re.findall(r"`GET (/[^`]*)`", section))
    for path in sorted(routes - listed):
        fail(f"docs/api.md's table of endpoints lacks GET {path} (routed in src/http.rs)")
    return count


def check_runbook_curls():
    text = (ROOT / "docs/runbooks.md").read_text()
    count = 0
    for code in code_texts(text):
        for part in re.split(r"\||&&|;", code):
            if not re.search(r"(^|\s)curl\s", part) or "$API" not in part:
                continue
            count += 1
            if not re.search(r"-H\s+[\"']Authorization: Bearer \$\w+", part):
                fail(f"docs/runbooks.md: `{part.strip()[:70]}`: no -H \"Authorization: Bearer $TOKEN\"")
            if "--cacert" not in part:
                fail(f"docs/runbooks.md: `{part.strip()[:70]}`: no --cacert")
            if re.search(r"\s(-k|--insecure)\b", part):
                fail(f"docs/runbooks.md: `{part.strip()[:70]}`: -k skips the certificate")
    if count == 0:
        fail("docs/runbooks.md has no curl of $API")
    return count


def snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def check_reasons():
    """docs/eru.md's reasons table = src/vocab.rs's Reason, but `scheduled`."""
    vocab = (ROOT / "src/vocab.rs").read_text()
    body = re.search(r"pub enum Reason \{(.*?)\n\}", vocab, flags=re.S).group(1)
    body = re.sub(r"//[^\n]*", "", body)
    reasons = {snake(v) for v in re.findall(r"^\s*([A-Z]\w*),", body, flags=re.M)} - {"scheduled"}
    text = (ROOT / "docs/eru.md").read_text()
    table = text.split("### Reasons", 1)[1].split("\n\n", 2)[1]
    listed = re.findall(r"^\| (?:missed|skipped) \| `([a-z_]+)` \|", table, flags=re.M)
    for r in sorted(reasons - set(listed)):
        fail(f"docs/eru.md: the table of reasons lacks `{r}` (src/vocab.rs)")
    for r in sorted(set(listed) - reasons):
        fail(f"docs/eru.md: the table of reasons lists `{r}`, which src/vocab.rs's Reason lacks")
    for r in {r for r in listed if listed.count(r) > 1}:
        fail(f"docs/eru.md: the table of reasons lists `{r}` twice")
    return len(reasons)


def check_metrics():
    """docs/api.md's table of metrics = the eru_* names src/ registers outside test code."""
    registered = set()
    for path in (ROOT / "src").rglob("*.rs"):
        if path.name in ("tests.rs", "proptests.rs", "pg.rs") or path.name.endswith("_tests.rs") or "tests" in path.parts:
            continue
        text = re.split(r"#\[cfg\(test\)\]\s*mod tests \{", path.read_text())[0]
        registered.update(re.findall(r'"(eru_[a-z_]+)"', text))
    api = (ROOT / "docs/api.md").read_text()
    rows = [line for line in api.splitlines() if line.startswith("| `eru_")]
    listed = set()
    for row in rows:
        listed.update(re.findall(r"`(eru_[a-z_]+)", row.split(" | ")[0]))
    for m in sorted(registered - listed):
        fail(f"docs/api.md: the table of metrics lacks {m} (registered in src/)")
    for m in sorted(listed - registered):
        fail(f"docs/api.md: the table of metrics lists {m}, which src/ does not register")
    return len(registered)


def check_source_paths():
    """Source paths named in code spans of the architecture and development pages exist."""
    count = 0
    for name in ("docs/architecture.md", "docs/development.md"):
        text = (ROOT / name).read_text()
        for span in re.findall(r"`([^`\n]+)`", text):
            for path in re.findall(r"(?:^|\s)((?:src|hack|tests|benches|examples)/[\w./-]*\w)", span):
                count += 1
                if not (ROOT / path).exists():
                    fail(f"{name}: `{path}` does not exist")
    return count


BIN = binary()
pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md")),
         *sorted(ROOT.glob("charts/*/README.md"))]
for page in pages:
    check_links(page)
    check_tables(page)
check_readme_links_docs()
alerts = check_runbooks()
check_alert_counts()
flags = check_flags(pages)
endpoints = check_endpoints(pages)
curls = check_runbook_curls()
reasons = check_reasons()
metrics = check_metrics()
paths = check_source_paths()

if failures:
    print("docs check failed:", *failures, sep="\n  ", file=sys.stderr)
    sys.exit(1)
print(f"docs check: {len(pages)} pages, their links resolve and tables hold; {alerts} alerts, each with its "
      f"runbook section; {flags} flags and {endpoints} endpoints named, each the binary's; {curls} runbook "
      f"curls with token and CA; {reasons} reasons and {metrics} metrics, each documented once; {paths} source "
      f"paths named, each there")
