"""The Swift DNSSD library's integration tests, run inside a simulated host against its real avahi-daemon."""
import glob
import os

from testlan import BIN


def test_dnssd_library_against_real_avahi(lan):
    lan.up(1)
    bundle = glob.glob(os.path.join(BIN, "*PackageTests.xctest"))
    assert bundle, f"no test bundle in {BIN}: run swift build --build-tests first"
    result = lan.run("h1", ["env", "LANCHAT_AVAHI_TESTS=1", "AVAHI_COMPAT_NOWARN=1", bundle[0],
                            "--testing-library", "swift-testing", "--filter", "AvahiIntegrationTests"],
                     check=False, timeout=180)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "Suite AvahiIntegrationTests passed" in output or "AvahiIntegrationTests" in output, output[-2000:]
    assert "5 tests" in output, output[-2000:]
