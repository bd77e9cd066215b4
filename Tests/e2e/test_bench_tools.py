"""The benchmark tools that need no LAN: `scripts/bench.sh compare OLD.json NEW.json`."""
import json
import os
import subprocess

from testlan import ROOT


def test_compare_lines_up_two_runs_figures_with_their_ratio(tmp_path):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps({"file": {"socat_mb_s": 300, "lanchat_all": [100, 200, 300], "cpu_s_per_gib": {"lanchat": 4.0},
                                        "complete": True}, "history": {"seconds": 2.0}}))
    new.write_text(json.dumps({"file": {"socat_mb_s": 330, "lanchat_all": [150, 250, 350, 400], "cpu_s_per_gib": {"lanchat": 3.0}},
                               "history": {"seconds": 1.0}, "extra": 1}))
    result = subprocess.run(["bash", os.path.join(ROOT, "scripts", "bench.sh"), "compare", str(old), str(new)],
                            capture_output=True, text=True, timeout=60, check=True)
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()[1:] if not line.startswith("(")}
    assert rows["file.socat_mb_s"][1:] == ["300", "330", "1.10x"], result.stdout
    assert rows["file.lanchat_all"][-1] == "1.50x", result.stdout  # medians: 200 and 300
    assert rows["file.cpu_s_per_gib.lanchat"][-1] == "0.75x" and rows["history.seconds"][-1] == "0.50x", result.stdout
    assert "complete" not in result.stdout and "(in one run only: extra)" in result.stdout, result.stdout
    bad = subprocess.run(["bash", os.path.join(ROOT, "scripts", "bench.sh"), "compare", str(old)], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "usage" in bad.stderr, bad.stderr
