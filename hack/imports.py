#!/usr/bin/env python3
"""Import cycles among the library's files (src/, without main.rs), shared modules (runtime,
journal, metrics, machine, outbound) importing a kind or the wiring, notify importing the Eru's
wiring (anything of eru/ but its core), the Eru core (src/eru/core/, and every
file it imports, transitively) reaching a Kubernetes client or type, tokio, sqlx, the journal's rows
or the runtime, and journal text parsed (`parse_ts`) outside journal/: prints each and exits 1.

`hack/imports.py --self-test` checks that the core rule catches a core file importing the runtime
(on a copy of src/ with one such import added).

A file imports another when a `use` or a `crate::`/`super::`/`self::` path names an item of the
other file's module. Declaring a submodule (`mod x;`) is not an import. Run by hack/test.sh, so the
one-way layering (app → kinds → runtime → journal/metrics/machine) cannot quietly regress.
"""
import pathlib
import re
import sys

if sys.argv[1:] == ["--self-test"]:
    import shutil
    import subprocess
    import tempfile

    here = pathlib.Path(__file__).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        copy = pathlib.Path(tmp) / "src"
        shutil.copytree(here.parent.parent / "src", copy)
        planted = copy / "eru" / "core" / "ledger.rs"
        planted.write_text(planted.read_text() + "\nuse crate::runtime::lean::Deployment;\n")
        run = subprocess.run([sys.executable, str(here), str(copy)], capture_output=True, text=True)
    caught = run.returncode == 1 and "core: src/eru/core/ledger.rs" in run.stdout and "runtime" in run.stdout
    print("self-test: a core file importing crate::runtime " + ("is caught" if caught else "was NOT caught"))
    print(run.stdout, end="")
    sys.exit(0 if caught else 1)

src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent / "src").resolve()


def module_of(path):
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("lib", "mod"):
        parts = parts[:-1]
    return tuple(parts)


# strings, characters and comments, in one pass (a `//` inside a string is not a comment, a quote
# inside a comment or a character opens no string)
TOKENS = re.compile(
    r'\br(#*)".*?"\1|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])\'|/\*.*?\*/|//[^\n]*', re.S
)


def blank(match):
    token = match.group(0)
    return "" if token.startswith("/") else '""'


def strip(text):
    # an inline test module (at the end of a file, by convention) is not the file's imports: its
    # `super::*` is the file itself
    text = re.split(r"#\[cfg\(test\)\]\s*mod tests \{", text)[0]
    return TOKENS.sub(blank, text)


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
shared = {"runtime", "journal", "metrics", "machine", "error", "conditions", "outbound"}
upper = {"app", "config", "http", "history", "crds", "eru", "podset", "memcached"}
violations = [
    (m, t) for m in modules for t in edges[m] if m and t and m[0] in shared and t[0] in upper
]
for m, t in sorted(violations):
    print(f"layering: {modules[m].relative_to(src.parent)} (shared) imports {modules[t].relative_to(src.parent)}")
# notifications are told by the kinds' passes: they may read the Eru core's records, never reach
# up into the Eru's wiring (its gates, its passes) for a helper
upward = [(m, t) for m in modules for t in edges[m] if m[:1] == ("notify",) and t[:1] == ("eru",) and t[:2] != ("eru", "core")]
for m, t in sorted(upward):
    print(f"layering: {modules[m].relative_to(src.parent)} imports {modules[t].relative_to(src.parent)}, above it")
violations += upward

def code_of(path):
    """The file without comments (strings kept: a quote in a comment cannot desynchronize)."""
    text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def name_of(m):
    return str(modules[m].relative_to(src.parent))


# the Eru core: everything under eru/core/ is pure, decided from plain data, and so is everything
# it imports, transitively: no Kubernetes client or type, tokio or sqlx (named by a `use` or a
# crate path), no runtime module and no journal module but its vocabulary. Test files (tests.rs,
# proptests.rs, *_tests.rs) may build fixtures with the shell and are not followed.
forbidden_crates = ("kube", "k8s_openapi", "tokio", "sqlx")


def is_test(m):
    return bool(m) and (m[-1] in ("tests", "proptests") or m[-1].endswith("_tests"))


core = sorted(m for m in modules if m[:2] == ("eru", "core") and not is_test(m))


def impurity(m):
    """Why module `m` may not be reached from the core, or None."""
    if m[:1] == ("runtime",):
        return "is the runtime"
    if m[:1] == ("journal",) and m != ("journal", "vocab"):
        return "is the journal (only journal/vocab.rs is its vocabulary)"
    text = code_of(modules[m])
    roots = [tree.split("::")[0].strip().lstrip("{") for tree in re.findall(r"\buse\s+([^;]+);", text)]
    roots += re.findall(r"\b(" + "|".join(forbidden_crates) + r")::", text)
    named = sorted(set(r for r in roots if r in forbidden_crates))
    return f"uses {', '.join(named)}" if named else None


core_violations = []
if not core:
    core_violations.append("core: no file under src/eru/core/ (update hack/imports.py)")
for start in core:
    # breadth-first over imports, remembering how each module was reached
    came_from, queue = {start: None}, [start]
    while queue:
        m = queue.pop(0)
        why = impurity(m)
        if why:
            chain, at = [], m
            while at is not None:
                chain.append(name_of(at))
                at = came_from[at]
            core_violations.append(f"core: {' -> '.join(reversed(chain))}: {name_of(m)} {why}")
            continue
        for t in sorted(edges[m]):
            if t not in came_from and not is_test(t):
                came_from[t] = m
                queue.append(t)
for v in sorted(set(core_violations)):
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
      f"the Eru core ({len(core)} files under eru/core/, and all they import) names no client, "
      "tokio, sqlx, runtime or journal row; journal text is parsed in journal/ only")
