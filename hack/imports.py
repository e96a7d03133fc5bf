#!/usr/bin/env python3
"""Import cycles among the library's files (src/, without main.rs), shared modules (runtime,
journal, metrics, machine) importing a kind or the wiring, the Eru core (the pure plan, machine,
ledger, schedule and their data) importing a Kubernetes client, tokio, sqlx, the journal's rows or
the runtime, and journal text parsed (`parse_ts`) outside journal/: prints each and exits 1.

A file imports another when a `use` or a `crate::`/`super::`/`self::` path names an item of the
other file's module. Declaring a submodule (`mod x;`) is not an import. Run by hack/test.sh, so the
one-way layering (app → kinds → runtime → journal/metrics/machine) cannot quietly regress.
"""
import pathlib
import re
import sys

src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent / "src").resolve()


def module_of(path):
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("lib", "mod"):
        parts = parts[:-1]
    return tuple(parts)


def strip(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(\\.|[^"\\])*"', '""', text)


def use_paths(tree, prefix=()):
    """Expands a use tree (`a::{b, c::{d}}`) into paths."""
    tree = tree.strip()
    if not tree:
        return []
    if tree.endswith("}") and "{" in tree:
        head, inner = tree.split("{", 1)
        head = tuple(s for s in head.split("::") if s.strip())
        inner = inner[:-1]
        items, depth, cur = [], 0, ""
        for ch in inner:
            if ch == "," and depth == 0:
                items.append(cur)
                cur = ""
                continue
            depth += (ch == "{") - (ch == "}")
            cur += ch
        items.append(cur)
        return [p for item in items for p in use_paths(item, prefix + tuple(h.strip() for h in head))]
    path = tree.split(" as ")[0]
    return [prefix + tuple(s.strip() for s in path.split("::"))]


modules = {}
for path in src.rglob("*.rs"):
    if path.name != "main.rs":
        modules[module_of(path)] = path

edges = {m: set() for m in modules}
for module, path in modules.items():
    text = strip(path.read_text())
    paths = []
    for tree in re.findall(r"\buse\s+([^;]+);", text):
        paths += use_paths(tree)
    paths += [tuple(p.split("::")) for p in re.findall(r"\b(?:crate|super|self)(?:::\w+)+", text)]
    for p in paths:
        if p[0] == "crate":
            base, rest = (), p[1:]
        elif p[0] in ("super", "self"):
            base, rest = module, p
            while rest and rest[0] in ("super", "self"):
                if rest[0] == "super":
                    base = base[:-1]
                rest = rest[1:]
        else:
            continue
        target = base
        for seg in rest:
            if target + (seg,) in modules:
                target = target + (seg,)
            else:
                break
        if target != module and target in modules and target != module[: len(target)]:
            edges[module].add(target)
        elif target != module and target in modules and rest and target + (rest[0],) not in modules:
            # an item of an ancestor module (e.g. `super::Eru` from eru::reconcile)
            edges[module].add(target)

# layers: the shared modules import no kind and none of the wiring
shared = {"runtime", "journal", "metrics", "machine", "error", "conditions"}
upper = {"app", "config", "http", "history", "crds", "eru", "podset", "memcached"}
violations = [
    (m, t) for m in modules for t in edges[m] if m and t and m[0] in shared and t[0] in upper
]
for m, t in sorted(violations):
    print(f"layering: {modules[m].relative_to(src.parent)} (shared) imports {modules[t].relative_to(src.parent)}")

def code_of(path):
    """The file without comments (strings kept: a quote in a comment cannot desynchronize)."""
    text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def name_of(m):
    return str(modules[m].relative_to(src.parent))


# the Eru core: pure, decided from plain data; what it may not name, directly or by a crate path
core = [("eru", "plan"), ("eru", "plan", "start"), ("eru", "machine"), ("eru", "events"),
        ("eru", "ledger"), ("eru", "schedule"), ("eru", "hash"), ("eru", "observed"), ("eru", "hold")]
forbidden_crates = ("kube", "k8s_openapi", "tokio", "sqlx")
core_violations = []
for m in core:
    if m not in modules:
        core_violations.append(f"core: {'/'.join(m)}.rs is missing (update hack/imports.py)")
        continue
    text = code_of(modules[m])
    roots = [tree.split("::")[0].strip().lstrip("{") for tree in re.findall(r"\buse\s+([^;]+);", text)]
    roots += re.findall(r"\b(" + "|".join(forbidden_crates) + r")::", text)
    for crate in sorted(set(r for r in roots if r in forbidden_crates)):
        core_violations.append(f"core: {name_of(m)} uses {crate}")
    for t in edges[m]:
        if t[:1] == ("runtime",) or (t[:1] == ("journal",) and t != ("journal", "vocab")):
            core_violations.append(f"core: {name_of(m)} imports {'/'.join(t)} (only journal/vocab.rs)")
for v in core_violations:
    print(v)
parses = [p for p in src.rglob("*.rs") if "journal" not in p.relative_to(src).parts[:1]
          and re.search(r"\bparse_ts\b", code_of(p))]
for p in sorted(parses):
    print(f"journal text parsed outside journal/: {p.relative_to(src.parent)} calls parse_ts")

# cycles: strongly connected components with more than one file
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]


def connect(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in edges[v]:
        if w not in index:
            connect(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        scc = []
        while True:
            w = stack.pop()
            on.discard(w)
            scc.append(w)
            if w == v:
                break
        if len(scc) > 1:
            sccs.append(scc)


sys.setrecursionlimit(10000)
for v in modules:
    if v not in index:
        connect(v)
name = lambda m: str(modules[m].relative_to(src.parent))
for scc in sccs:
    print("import cycle:", ", ".join(sorted(name(m) for m in scc)))
    for m in sorted(scc):
        print(f"  {name(m)} -> " + ", ".join(sorted(name(t) for t in edges[m] if t in scc)))
if sccs or violations or core_violations or parses:
    sys.exit(1)
print(f"no import cycles among {len(modules)} files; shared modules import no kind; "
      f"the Eru core ({len(core)} files) imports no client, tokio, sqlx or journal row; "
      "journal text is parsed in journal/ only")
