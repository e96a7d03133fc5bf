#!/usr/bin/env python3
"""The restart pace's frontier as a picture: reads the table `hack/scale.sh N --paces ...` prints
(its rows "landed (last) against the limit [pace P]" and "slot K [pace P]: probe p99 in the burst
against idle"), writes an SVG scatter plot of the two ratios (one point per pace) and, with
Chromium (headless, as the page tests use it), a PNG of it.

    hack/frontier.py SCALE_OUTPUT.txt docs/img/frontier.png [--title TEXT] [--idle-from-first]
                     [--five-minutes]

--idle-from-first: every slot's burst p99 against the first slot's idle p99 (when a later slot's
idle window was not idle: the operator restarted in it, or the rollouts of the slot before it
still ran).
--five-minutes: the probe's p99 in each slot's first five minutes, not in its burst (a burst's
window ends with its last restart, so a fast one hides the rollouts that go on after it); needs a
table that has the row. SCALE_OUTPUT may hold the tables of several runs, one pace each.

A pace whose slot restarted fewer than all (the rest recorded skipped) says how many.

No plotting library: the picture is a few dozen SVG elements.
"""
import argparse
import html
import math
import pathlib
import re
import subprocess
import sys
import tempfile

LANDED = re.compile(r"^\| landed \(last\) against the limit \[pace (?P<pace>[^\]]+)\] \| .*?: (?P<x>[0-9.]+)x")
PROBE = re.compile(r"^\| slot \d+ \[pace (?P<pace>[^\]]+)\]: probe p99 in the burst against idle \| (?P<y>[0-9.]+)x")
FIVE = re.compile(r"^\| slot \d+ \[pace (?P<pace>[^\]]+)\]: probe p99 in the slot's first 5 minutes against idle \| (?P<y>[0-9.]+)x")
RESTARTED = re.compile(r"^\| slot \d+ \[pace (?P<pace>[^\]]+)\]: exactly once \(the journal\) \| (?P<done>\d+) of (?P<n>\d+) Erus restarted")
WINDOW = re.compile(r"^\| slot \d+ \[pace (?P<pace>[^\]]+)\]: probe client, (?P<window>idle|in the burst|the slot's first 5 minutes)[^|]*\| .*p99 (?P<p99>[0-9.]+) (?P<unit>ms|s)")


def seconds(value, unit):
    return float(value) / (1000 if unit == "ms" else 1)


def points(text, idle_from_first=False, five_minutes=False):
    """[(pace, landed × the limit, probe p99 × idle, restarted or None if all)], in the table's
    order."""
    landed, probe, order, windows, partial = {}, {}, [], {}, {}
    for line in text.splitlines():
        if m := LANDED.match(line):
            if m["pace"] in landed:
                sys.exit(f"frontier: pace {m['pace']} twice: give each pace's table once")
            landed[m["pace"]] = float(m["x"])
            order.append(m["pace"])
        elif m := (FIVE if five_minutes else PROBE).match(line):
            probe[m["pace"]] = float(m["y"])
        elif m := RESTARTED.match(line):
            if m["done"] != m["n"]:
                partial[m["pace"]] = f"{int(m['done']):,} of {int(m['n']):,} restarted"
        elif m := WINDOW.match(line):
            windows.setdefault(m["pace"], {})[m["window"]] = seconds(m["p99"], m["unit"])
    if idle_from_first and windows:
        idle = next(iter(windows.values()))["idle"]
        window = "the slot's first 5 minutes" if five_minutes else "in the burst"
        probe = {pace: w[window] / idle for pace, w in windows.items() if window in w}
    missing = [p for p in order if p not in probe]
    if not order or missing:
        sys.exit(f"frontier: no pace rows, or no probe row for {missing}: is this `hack/scale.sh --paces` output?")
    return [(p, landed[p], probe[p], partial.get(p)) for p in order]


def svg(rows, title, window="in the burst", width=820, height=520):
    left, right, top, bottom = 80, 30, 50, 70
    xs = [r[1] for r in rows] + [1.0, 2.0]
    ys = [r[2] for r in rows] + [1.0, 5.0]
    x_max = max(xs) * 1.15
    # the probe's ratio spans two orders of magnitude: a log axis
    y_lo, y_hi = math.log10(0.8), math.log10(max(ys) * 1.5)

    def px(x):
        return left + (x / x_max) * (width - left - right)

    def py(y):
        return top + (1 - (math.log10(y) - y_lo) / (y_hi - y_lo)) * (height - top - bottom)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="13">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="24" text-anchor="middle" font-size="16">{html.escape(title)}</text>']
    # the target: landed within 2× the limit, the probe within 5× idle
    out.append(f'<rect x="{px(0)}" y="{py(5)}" width="{px(2) - px(0)}" height="{py(0.8) - py(5)}" fill="#e6f4e6"/>')
    out.append(f'<text x="{px(0) + 6}" y="{py(5) + 16}" fill="#2a7a2a">target: ≤ 2× the limit, ≤ 5× idle</text>')
    for tick in [t for t in (0.5, 1, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20) if t <= x_max]:
        out.append(f'<line x1="{px(tick)}" x2="{px(tick)}" y1="{top}" y2="{height - bottom}" stroke="#ddd"/>')
        out.append(f'<text x="{px(tick)}" y="{height - bottom + 18}" text-anchor="middle">{tick:g}×</text>')
    for tick in [t for t in (1, 2, 5, 10, 20, 50, 100, 200, 500) if y_lo <= math.log10(t) <= y_hi]:
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{py(tick)}" y2="{py(tick)}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 8}" y="{py(tick) + 4}" text-anchor="end">{tick:g}×</text>')
    out.append(f'<text x="{(left + width - right) / 2}" y="{height - 20}" text-anchor="middle">last restart landed, × the API server\'s own limit (faster ←)</text>')
    out.append(f'<text transform="translate(22,{(top + height - bottom) / 2}) rotate(-90)" text-anchor="middle">another client\'s p99 {window}, × idle (gentler ↓)</text>')
    for pace, x, y, partial in rows:
        out.append(f'<circle cx="{px(x)}" cy="{py(y)}" r="6" fill="#1f5fa8"/>')
        # a point in the right third is labelled below it, on its left, so the label stays in the
        # picture and clear of its neighbours' (which sit above theirs)
        at_right = px(x) > left + (width - left - right) * 2 / 3
        # (or below it, on its right, when a neighbour's label would run into its own)
        crowded = any(0 < px(ox) - px(x) < 320 and abs(py(oy) - py(y)) < 24 for _, ox, oy, _ in rows)
        anchor, dx, dy = ("end", -4, 22) if at_right else ("start", 10, 22 if crowded else -8)
        out.append(f'<text x="{px(x) + dx}" y="{py(y) + dy}" text-anchor="{anchor}">{html.escape(pace)} ({x:.2f}×, {y:.0f}×)</text>')
        if partial:
            out.append(f'<text x="{px(x) + dx}" y="{py(y) + dy + 16}" text-anchor="{anchor}" fill="#a83a1f">{html.escape(partial)}, the rest skipped</text>')
    out.append('</svg>')
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=pathlib.Path)
    parser.add_argument("png", type=pathlib.Path)
    parser.add_argument("--title", default="The restart pace: a fleet restart's speed against its cost to others")
    parser.add_argument("--idle-from-first", action="store_true")
    parser.add_argument("--five-minutes", action="store_true")
    args = parser.parse_args()
    rows = points(args.output.read_text(), args.idle_from_first, args.five_minutes)
    for pace, x, y, partial in rows:
        print(f"{pace:>16}  landed {x:5.2f}× the limit  probe p99 {y:7.2f}× idle{'  ' + partial if partial else ''}")
    picture = svg(rows, args.title, "in the slot's first 5 minutes" if args.five_minutes else "in the burst")
    with tempfile.TemporaryDirectory() as tmp:
        page = pathlib.Path(tmp) / "frontier.html"
        page.write_text(f"<!doctype html><html><body style='margin:0'>{picture}</body></html>")
        subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--screenshot={args.png.resolve()}", "--window-size=820,520", page.as_uri()],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
