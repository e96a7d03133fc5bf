#!/usr/bin/env python3
"""The tenancy measurements of `hack/http-abuse.sh --tenancy` (run it through the script, which
brings up a cluster, installs deploy/'s RBAC, makes the identities and starts the operator with
--http-auth kubernetes and --probe-address). Prints figures; asserts no timing.

  http-tenancy.py sweep API NOBODY_TOKEN READER_TOKEN READER_NAMESPACE [--requests 100]
      an identity with no grant sends REQUESTS concurrent /history without namespace=, while the
      reader (granted erus/history in READER_NAMESPACE, and /metrics) loops on
      /history?namespace=READER_NAMESPACE; prints each crowd's answers by status, and the
      SubjectAccessReviews the operator sent meanwhile (eru_http_access_reviews_total, read as
      the reader) against the budget
  http-tenancy.py flood API PROBES [--connections 1000] [--seconds 20]
      holds CONNECTIONS idle TCP connections to the API port (reopened as the server closes
      them) while /readyz is asked on the probe port every 100 ms and on the API port every
      500 ms (2 s timeout); prints the latencies (median, p99, max) and the API port's timeouts

API is https://HOST:PORT (the self-signed certificate is not verified), PROBES http://HOST:PORT.
"""
import argparse
import http.client
import re
import resource
import socket
import ssl
import statistics
import sys
import threading
import time
import urllib.parse

TLS = ssl.create_default_context()
TLS.check_hostname = False
TLS.verify_mode = ssl.CERT_NONE


def get(base, path, token=None, timeout=10.0):
    """(status or the error's name, seconds) of GET base+path."""
    url = urllib.parse.urlsplit(base)
    started = time.monotonic()
    try:
        if url.scheme == "https":
            conn = http.client.HTTPSConnection(url.hostname, url.port, timeout=timeout, context=TLS)
        else:
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        response.read()
        conn.close()
        return response.status, time.monotonic() - started
    except (OSError, http.client.HTTPException) as e:
        return type(e).__name__, time.monotonic() - started


def reviews(api, token):
    """eru_http_access_reviews_total{review="access"} by result, read from /metrics."""
    url = urllib.parse.urlsplit(api)
    conn = http.client.HTTPSConnection(url.hostname, url.port, timeout=10, context=TLS)
    conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})
    text = conn.getresponse().read().decode()
    counted = {}
    for m in re.finditer(r"^eru_http_access_reviews_total\{([^}]*)\} (\d+)", text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if labels.get("review") == "access":
            counted[labels["result"]] = int(m.group(2))
    return counted


def tally(answers):
    out = {}
    for status, _ in answers:
        out[status] = out.get(status, 0) + 1
    return " ".join(f"{k}: {v}" for k, v in sorted(out.items(), key=str))


def sweep(args):
    before = reviews(args.api, args.reader)
    crowd, reader, done = [], [], threading.Event()

    def nobody():
        crowd.append(get(args.api, "/history?limit=10", args.nobody, timeout=35))

    def granted():
        while not done.is_set():
            reader.append(get(args.api, f"/history?namespace={args.namespace}&limit=10", args.reader, timeout=35))

    readers = [threading.Thread(target=granted) for _ in range(4)]
    for t in readers:
        t.start()
    started = time.monotonic()
    threads = [threading.Thread(target=nobody) for _ in range(args.requests)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - started
    done.set()
    for t in readers:
        t.join()
    after = reviews(args.api, args.reader)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in sorted(set(after) | set(before))}
    print(f"no-grant identity: {args.requests} concurrent /history without namespace=, {took:.1f} s: {tally(crowd)}")
    lat = sorted(s for _, s in reader)
    print(
        f"granted reader meanwhile: {len(reader)} /history?namespace={args.namespace}: {tally(reader)}; "
        f"median {statistics.median(lat) * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms"
    )
    print(
        "SubjectAccessReviews (eru_http_access_reviews_total{review=\"access\"} delta): "
        + ", ".join(f"{k} {v}" for k, v in delta.items())
        + f"; budget: {args.budget} per caller per 20 s (the reader's own included)"
    )


def flood(args):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.connections + 256)), hard))
    api = urllib.parse.urlsplit(args.api)
    sockets, stop = [], threading.Event()

    def hold():
        # idle connections: never a byte; reopened when the server closes one (its 10 s deadline)
        while not stop.is_set():
            while len(sockets) < args.connections and not stop.is_set():
                try:
                    sockets.append(socket.create_connection((api.hostname, api.port), timeout=1))
                except OSError:
                    break
            for s in list(sockets):
                s.setblocking(False)
                try:
                    if s.recv(1) == b"":
                        sockets.remove(s)
                        s.close()
                except BlockingIOError:
                    pass
                except OSError:
                    sockets.remove(s)
            time.sleep(0.2)
        for s in sockets:
            s.close()

    quiet_probe = [get(args.probes, "/readyz")[1] for _ in range(20)]
    holder = threading.Thread(target=hold)
    holder.start()
    # past the server's cap and its accept queue the kernel drops the SYNs: wait for the count to
    # stop growing
    plateau, last = time.monotonic() + 3, 0
    while len(sockets) < args.connections and time.monotonic() < plateau:
        if len(sockets) > last:
            plateau, last = time.monotonic() + 3, len(sockets)
        time.sleep(0.1)
    held = len(sockets)
    probe, api_port, until = [], [], time.monotonic() + args.seconds

    def ask_api():
        while time.monotonic() < until:
            api_port.append(get(args.api, "/readyz", timeout=2))
            time.sleep(0.5)

    asker = threading.Thread(target=ask_api)
    asker.start()
    while time.monotonic() < until:
        probe.append(get(args.probes, "/readyz"))
        time.sleep(0.1)
    asker.join()
    stop.set()
    holder.join()

    def fig(seconds):
        seconds = sorted(seconds)
        p99 = seconds[min(len(seconds) - 1, int(len(seconds) * 0.99))]
        return f"median {statistics.median(seconds) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, max {seconds[-1] * 1000:.1f} ms"

    print(f"/readyz on the probe port, quiet: {fig(quiet_probe)}")
    print(f"{args.connections} idle connections tried, {held} open (the rest beyond the cap and the accept queue), for {args.seconds} s:")
    print(f"  /readyz on the probe port: {len(probe)} asked, {tally(probe)}; {fig([s for _, s in probe])}")
    print(f"  /readyz on the API port (2 s timeout): {len(api_port)} asked, {tally(api_port)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("sweep")
    s.add_argument("api")
    s.add_argument("nobody")
    s.add_argument("reader")
    s.add_argument("namespace")
    s.add_argument("--requests", type=int, default=100)
    s.add_argument("--budget", type=int, default=32)
    f = sub.add_parser("flood")
    f.add_argument("api")
    f.add_argument("probes")
    f.add_argument("--connections", type=int, default=1000)
    f.add_argument("--seconds", type=int, default=20)
    args = parser.parse_args()
    {"sweep": sweep, "flood": flood}[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
