#!/usr/bin/env python3
"""The ledger's vocabulary is spelled in one place: src/vocab.rs. Fails (exit 1) on a Rust string
literal elsewhere in src/ that is exactly one of its wire names (`"fired"`, `"operator_down"`,
`"in_progress"`, ...): such a name is written `Reason::OperatorDown` (`.as_str()` where text is
needed), so the compiler sees every use. Test code (tests.rs, proptests.rs, *_tests.rs, a test
module's folder `tests/`, inline `mod tests`) may spell the names it expects. The journal's SQL text names stored values as its
schema does (`WHERE outcome = 'in_progress'` matches the partial index's predicate); a whole
literal is what is checked. Run by hack/test.sh."""
import pathlib
import re
import sys

src = pathlib.Path(__file__).resolve().parent.parent / "src"
vocab = (src / "vocab.rs").read_text()


def snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


words = set()
for body in re.findall(r"pub enum \w+ \{(.*?)\n\}", vocab, flags=re.S):
    body = re.sub(r"//[^\n]*", "", body)
    words.update(snake(v) for v in re.findall(r"^\s*([A-Z]\w*),", body, flags=re.M))
if len(words) < 20:
    sys.exit(f"hack/vocabulary.py: only {len(words)} names read from src/vocab.rs; update the script")

literal = re.compile(r'"(' + "|".join(sorted(words)) + r')"')
found = []
for path in sorted(src.rglob("*.rs")):
    test_file = path.name in ("tests.rs", "proptests.rs") or path.name.endswith("_tests.rs")
    if path == src / "vocab.rs" or test_file or "tests" in path.relative_to(src).parts[:-1]:
        continue
    text = re.split(r"#\[cfg\(test\)\]\s*mod tests \{", path.read_text())[0]
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("//")[0]
        for m in literal.finditer(code):
            found.append(f"{path.relative_to(src.parent)}:{number}: \"{m.group(1)}\" is the vocabulary's (src/vocab.rs): {line.strip()}")
for f in found:
    print(f)
if found:
    sys.exit(1)
print(f"vocabulary: the {len(words)} wire names are spelled in src/vocab.rs only")
