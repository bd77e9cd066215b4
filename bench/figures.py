"""What every benchmark script shares: running one figure so that a failure is told and the run goes on."""
import statistics
import sys


def figure(missing, name, function, *args):
    """Runs one figure. When it breaks (a wait timed out, a check failed, anything else), says so, records the figure as
    missing (with what it waited for) and returns None, so that the benchmark goes on to the next one."""
    try:
        return function(*args)
    except Exception as error:  # noqa: BLE001 (a figure that breaks must not take the others with it)
        missing[name] = f"{type(error).__name__}: {error}" if not isinstance(error, AssertionError) else (str(error) or "AssertionError")
        print(f"{name}: figure missing: {missing[name]}", file=sys.stderr)
        return None


def median(values):
    """The median of a figure's runs."""
    return statistics.median(values)


def proc_status(lan, host, pid):
    """/proc/PID/status of a process on `host` (its own pid namespace): each field's text."""
    status = lan.run(host, ["cat", f"/proc/{pid}/status"]).stdout
    return {line.split(":")[0]: line.split(":")[1].strip() for line in status.splitlines() if ":" in line}


def cpu_ticks(lan, host, pid, children=False):
    """User + system CPU time of a process on `host`, in clock ticks (/proc/PID/stat); with `children`,
    that of the children it reaped too."""
    fields = lan.run(host, ["cat", f"/proc/{pid}/stat"]).stdout.rsplit(")", 1)[1].split()
    return sum(int(fields[index]) for index in ((11, 12, 13, 14) if children else (11, 12)))


def proc_stats(lan, host, pid):
    values = proc_status(lan, host, pid)
    ticks = cpu_ticks(lan, host, pid)
    # Context switches of each thread, by thread id: each one is a wake-up (`wakeups` takes the difference).
    # (`|| true`: a thread that ends between the glob and its read makes grep fail.)
    switches = lan.run(host, ["sh", "-c", f"grep -H ctxt_switches /proc/{pid}/task/*/status || true"]).stdout
    total = {}
    for line in switches.splitlines():
        tid = line.split("/task/")[1].split("/")[0]
        total[tid] = total.get(tid, 0) + int(line.rsplit(":", 1)[1])
    # PSS (shared pages split between the processes that map them) and private memory (no one else's).
    rollup = lan.run(host, ["cat", f"/proc/{pid}/smaps_rollup"]).stdout
    memory = {line.split(":")[0]: int(line.split(":")[1].split()[0]) for line in rollup.splitlines()[1:] if ":" in line}
    return {"rss_kib": int(values["VmRSS"].split()[0]), "ticks": ticks, "switches": total,
            "threads": int(values["Threads"]), "pss_kib": memory.get("Pss", 0),
            "private_kib": memory.get("Private_Clean", 0) + memory.get("Private_Dirty", 0)}


def wakeups(before, after):
    """Context switches between two `proc_stats`, thread by thread: a thread started meanwhile counts
    whole, one that ended counts nothing (summing all threads' counters went negative when one ended)."""
    return sum(count - before["switches"].get(tid, 0) for tid, count in after["switches"].items())


def stop_quietly(what, stop):
    """Clean-up after a figure, which must not hide why the figure failed: a failure here is only told."""
    try:
        stop()
    except Exception as error:  # noqa: BLE001
        print(f"clean-up: {what}: {error}", file=sys.stderr)
