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


def stop_quietly(what, stop):
    """Clean-up after a figure, which must not hide why the figure failed: a failure here is only told."""
    try:
        stop()
    except Exception as error:  # noqa: BLE001
        print(f"clean-up: {what}: {error}", file=sys.stderr)
