"""Discovery and idle benchmarks on the simulated LAN, each figure next to a baseline from the same run.

1. Discovery latency: time from starting lanchatd on host h1 until the neighbour h2's daemon lists it
   (the `found` event of `lanchat watch`, which is when `lanchat peers` starts listing it), next to the
   time `avahi-browse` on h2 takes to see a plain `avahi-publish` service started the same way on h1
   (and `avahi-browse -r`, which also resolves, as lanchat must).
2. Idle cost: resident memory and CPU of one lanchatd with 3 peers after 60 s, next to the
   avahi-daemon on the same host.

Usage (root): python3 bench/discovery.py [--trials N] [--idle-seconds S]"""
import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "e2e"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlan import BIN, TestLAN, wait_for, wait_process  # noqa: E402
from figures import figure, proc_stats, stop_quietly, wakeups  # noqa: E402


def reader(process):
    """The process's output lines as they arrive, stamped with their arrival time; (time, None) at its end."""
    lines = queue.Queue()

    def pump():
        for line in process.stdout:
            lines.put((time.monotonic(), line))
        lines.put((time.monotonic(), None))
    threading.Thread(target=pump, daemon=True).start()
    return lines


def wait_line(lines, match, what, timeout=30):
    """The arrival time of the next line for which match(line) is true; fails naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            stamp, line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}") from None
        if line is None:
            lines.put((stamp, None))
            raise AssertionError(f"the output ended while waiting for {what}")
        if match(line):
            return stamp


def summary(samples):
    samples = sorted(samples)
    p90 = samples[min(len(samples) - 1, int(round(0.9 * (len(samples) - 1))))]
    return {"median_ms": round(statistics.median(samples) * 1000, 1), "p90_ms": round(p90 * 1000, 1),
            "min_ms": round(samples[0] * 1000, 1), "max_ms": round(samples[-1] * 1000, 1), "n": len(samples)}


def discovery(lan, trials):
    lan.start_daemon("h2", name="neighbour", extra=["--log-level", "warning"])
    watch = lan.popen("h2", [os.path.join(BIN, "lanchat"), "watch", "--json"], stdout=subprocess.PIPE,
                      stderr=subprocess.DEVNULL, text=True)
    browse = lan.popen("h2", ["avahi-browse", "-p", "_chat-service._tcp"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    resolve = lan.popen("h2", ["avahi-browse", "-rp", "_chat-service._tcp"], stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL, text=True)
    watch_lines, browse_lines, resolve_lines = reader(watch), reader(browse), reader(resolve)
    publisher = daemon = None
    try:
        time.sleep(1)
        results = {"lanchat": [], "avahi_browse": [], "avahi_browse_resolve": []}
        for trial in range(trials):
            # avahi-publish, the baseline.
            name = f"plain-{trial}"
            start = time.monotonic()
            publisher = lan.popen("h1", ["avahi-publish", "-s", name, "_chat-service._tcp", "4242", "v=0"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            seen = wait_line(browse_lines, lambda l: l.startswith("+;") and f";{name};" in l,
                             f"`avahi-browse` on h2 to list {name} (trial {trial + 1})")
            resolved = wait_line(resolve_lines, lambda l: l.startswith("=;") and f";{name};" in l,
                                 f"`avahi-browse -r` on h2 to resolve {name} (trial {trial + 1})")
            results["avahi_browse"].append(seen - start)
            results["avahi_browse_resolve"].append(resolved - start)
            publisher.terminate()
            wait_process(publisher, 10, f"avahi-publish of {name} on h1 to exit")
            time.sleep(0.5)
            # lanchatd, started the same way.
            name = f"bench-{trial}"
            start = time.monotonic()
            daemon = lan.popen("h1", [os.path.join(BIN, "lanchatd"), "--name", name, "--state-dir",
                                      os.path.join(lan.dir, "bench-state"), "--log-level", "warning"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            found = wait_line(watch_lines, lambda l: json.loads(l).get("type") == "found"
                              and json.loads(l)["peer"]["name"] == name,
                              f"`lanchat watch` on h2 to report {name} found (trial {trial + 1})")
            results["lanchat"].append(found - start)
            # Confirm that `lanchat peers` lists it now.
            assert name in [p["name"] for p in lan.peers("h2")], f"`lanchat peers` on h2 to list {name} after its found event"
            lan.run("h1", ["pkill", "-TERM", "-x", "lanchatd"])
            wait_process(daemon, 10, f"lanchatd {name} on h1 to exit after SIGTERM")
            wait_line(watch_lines, lambda l: json.loads(l).get("type") == "lost",
                      f"`lanchat watch` on h2 to report {name} lost (trial {trial + 1})")
            time.sleep(0.5)
    finally:
        # Also after a timeout: nothing of this figure may run on into the next.
        if publisher is not None and publisher.poll() is None:
            publisher.terminate()
            stop_quietly("avahi-publish on h1", lambda: wait_process(publisher, 10, "avahi-publish on h1 to exit"))
        if daemon is not None and daemon.poll() is None:
            stop_quietly("lanchatd on h1", lambda: lan.run("h1", ["pkill", "-KILL", "-x", "lanchatd"], check=False))
            stop_quietly("lanchatd on h1", lambda: wait_process(daemon, 10, "the benchmark's lanchatd on h1 to exit"))
        for process in (watch, browse, resolve):
            process.kill()
        for neighbour in lan.daemons:
            stop_quietly(f"lanchatd on {neighbour.host}", neighbour.stop)
        lan.daemons.clear()
    return {k: summary(v) for k, v in results.items()}


def idle(lan, seconds, window):
    daemons = {h: lan.start_daemon(h, name=f"idle-{h}", extra=["--log-level", "warning"]) for h in ("h1", "h2", "h3", "h4")}
    try:
        wait_for(lambda: len(lan.peers("h1")) == 3, timeout=20, what="h1 to see 3 peers")
        pid = daemons["h1"].pid()
        avahi_pid = lan.run("h1", ["cat", "/run/avahi-daemon/pid"]).stdout.strip()
        time.sleep(max(0, seconds - window))
        before, avahi_before = proc_stats(lan, "h1", pid), proc_stats(lan, "h1", avahi_pid)
        time.sleep(window)
        after, avahi_after = proc_stats(lan, "h1", pid), proc_stats(lan, "h1", avahi_pid)
        hz = os.sysconf("SC_CLK_TCK")

        def figures(b, a):
            return {"rss_mib": round(a["rss_kib"] / 1024, 1), "pss_mib": round(a["pss_kib"] / 1024, 1),
                    "private_mib": round(a["private_kib"] / 1024, 1), "cpu_percent": round(100 * (a["ticks"] - b["ticks"]) / hz / window, 3),
                    "wakeups_per_s": round(wakeups(b, a) / window, 1), "threads": a["threads"]}
        result = {"lanchatd": figures(before, after), "avahi_daemon": figures(avahi_before, avahi_after),
                  "after_seconds": seconds, "window_seconds": window, "peers": len(lan.peers("h1"))}
    finally:
        for d in daemons.values():
            stop_quietly(f"lanchatd on {d.host}", d.stop)
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--idle-seconds", type=int, default=60)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    lan = TestLAN()
    missing = {}
    try:
        lan.up(4)
        print(f"discovery: {args.trials} trials on a 4-host simulated LAN (binaries: {BIN})", file=sys.stderr)
        disc = figure(missing, "discovery", discovery, lan, args.trials)
        print(f"idle: one lanchatd with 3 peers, measured over the last 30 s of {args.idle_seconds} s", file=sys.stderr)
        idl = figure(missing, "idle", idle, lan, args.idle_seconds, min(30, args.idle_seconds))
    finally:
        lan.down()
    report = {"discovery": disc, "idle": idl}
    if missing:
        report["missing"] = missing
    if args.json:
        print(json.dumps(report, indent=2))
        sys.exit(1 if missing else 0)
    print(f"Discovery: start on h1 -> listed on h2 (ms), {args.trials} trials   median    p90    min    max")
    if disc is not None:
        l, b, r = disc["lanchat"], disc["avahi_browse"], disc["avahi_browse_resolve"]
        print(f"  lanchatd -> lanchat peers                       {l['median_ms']:7.1f} {l['p90_ms']:6.1f} {l['min_ms']:6.1f} {l['max_ms']:6.1f}")
        print(f"  avahi-publish -> avahi-browse     (baseline)    {b['median_ms']:7.1f} {b['p90_ms']:6.1f} {b['min_ms']:6.1f} {b['max_ms']:6.1f}")
        print(f"  avahi-publish -> avahi-browse -r  (baseline)    {r['median_ms']:7.1f} {r['p90_ms']:6.1f} {r['min_ms']:6.1f} {r['max_ms']:6.1f}")
        print(f"  lanchat - avahi-browse: {l['median_ms'] - b['median_ms']:+.1f} ms (median; goal: within +100 ms)")
    else:
        print(f"  missing: {missing['discovery']}")
    if idl is not None:
        i, a = idl["lanchatd"], idl["avahi_daemon"]
        print(f"Idle after {idl['after_seconds']} s with {idl['peers']} peers     RSS MiB  PSS MiB  private MiB   CPU %   wakeups/s  threads")
        print(f"  lanchatd                                  {i['rss_mib']:7.1f} {i['pss_mib']:8.1f} {i['private_mib']:12.1f} {i['cpu_percent']:7.3f} {i['wakeups_per_s']:10.1f} {i['threads']:8d}")
        print(f"  avahi-daemon (baseline)                   {a['rss_mib']:7.1f} {a['pss_mib']:8.1f} {a['private_mib']:12.1f} {a['cpu_percent']:7.3f} {a['wakeups_per_s']:10.1f} {a['threads']:8d}")
    else:
        print(f"Idle after {args.idle_seconds} s with 3 peers")
        print(f"  missing: {missing['idle']}")
    print("  goals: lanchatd under 30 MiB resident and under 10 MiB private, no wake-ups beyond heartbeats")
    if missing:
        sys.exit(1)


if __name__ == "__main__":
    main()
