#!/usr/bin/env python3
"""Functions in src/ stay short enough to read at once: fails (exit 1) on a function body over
LIMIT lines, test code (tests.rs, proptests.rs, *_tests.rs, inline `mod tests`) aside. A function
is `fn name(...) ... {` to its matching `}`, found by counting braces outside strings, chars and
comments. Run by hack/test.sh; `--all` lists every function over 60 lines."""
import pathlib
import re
import sys

LIMIT = 80
src = pathlib.Path(__file__).resolve().parent.parent / "src"


def blank(text):
    """The text with comments, strings and char literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = '"' + hashes
            j = text.find(end, i + 2 + len(hashes))
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", text[i:j + 1]))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            m = re.match(r"'(\\.|[^\\'])'", text[i:i + 4])
            out.append(" " * len(m.group(0)))
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    text = path.read_text()
    code = blank(re.split(r"#\[cfg\(test\)\]\s*mod tests \{", text)[0])
    for m in re.finditer(r"\bfn\s+(\w+)", code):
        brace = code.find("{", m.end())
        semicolon = code.find(";", m.end())
        if brace < 0 or (0 <= semicolon < brace):
            continue  # a declaration without a body
        depth, j = 0, brace
        while j < len(code):
            depth += (code[j] == "{") - (code[j] == "}")
            if depth == 0:
                break
            j += 1
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, j) + 1
        yield m.group(1), first, last - first + 1


threshold = 60 if "--all" in sys.argv else LIMIT
long = []
for path in sorted(src.rglob("*.rs")):
    if path.name in ("tests.rs", "proptests.rs") or path.name.endswith("_tests.rs"):
        continue
    for name, line, length in functions(path):
        if length > threshold:
            long.append((length, f"{path.relative_to(src.parent)}:{line} {name}"))
for length, where in sorted(long, reverse=True):
    print(f"{where}: {length} lines")
if any(length > LIMIT for length, _ in long):
    sys.exit(f"functions over {LIMIT} lines: split them (hack/lengths.py)")
print(f"no function in src/ over {LIMIT} lines (tests aside)")
