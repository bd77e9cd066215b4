"""The simulated LAN's own fault injection works, so tests that rely on it test what they claim."""
import re
import subprocess

import pytest


def ping(lan, src, dst, count=3, timeout=1):
    return lan.run(src, ["ping", "-n", "-c", str(count), "-W", str(timeout), "-i", "0.2", lan.addr(dst)], check=False)


def test_hosts_reach_each_other_and_only_their_test_interface(lan):
    lan.up(2)
    assert ping(lan, "h1", "h2").returncode == 0
    links = lan.run("h1", ["ip", "-o", "link"]).stdout
    assert sorted(re.findall(r"^\d+: ([^:@]+)", links, re.M)) == ["lan0", "lo"]
    conf = open(lan.env["TESTLAN_DIR"] + "/hosts/h1/avahi-daemon.conf").read()
    assert "allow-interfaces=lan0" in conf
    assert lan.run("h1", ["hostname"]).stdout.strip() == "h1"


def test_link_down_cuts_a_host_off_and_up_restores_it(lan):
    lan.up(2)
    lan.script("link", "h2", "down")
    assert ping(lan, "h1", "h2", count=2).returncode != 0
    lan.script("link", "h2", "up")
    assert ping(lan, "h1", "h2", count=5).returncode == 0


def test_loss_drops_packets_and_zero_restores(lan):
    lan.up(2)
    lan.script("loss", "h2", "100")
    assert ping(lan, "h1", "h2", count=2).returncode != 0
    lan.script("loss", "h2", "50")
    out = ping(lan, "h1", "h2", count=40, timeout=1).stdout
    received = int(re.search(r"(\d+) received", out).group(1))
    assert 5 <= received <= 35, out   # about half; bounds wide enough never to flake
    lan.script("loss", "h2", "0")
    assert ping(lan, "h1", "h2", count=5).returncode == 0


def test_netem_adds_delay(lan):
    lan.up(2)
    try:
        lan.script("netem", "h2", "delay", "50ms")
    except subprocess.CalledProcessError as error:
        if "unknown" in (error.stderr or ""):
            pytest.skip("this kernel has no sch_netem (tc netem); use `testlan.sh loss` for packet loss")
        raise
    out = ping(lan, "h1", "h2", count=3).stdout
    rtts = [float(x) for x in re.findall(r"time=([\d.]+)", out)]
    assert rtts and min(rtts) >= 45, out
    lan.script("netem", "h2", "clear")
    out = ping(lan, "h1", "h2", count=3).stdout
    assert max(float(x) for x in re.findall(r"time=([\d.]+)", out)) < 45, out
