"""An independent DNS-SD client (python-zeroconf, not avahi): browses _chat-service._tcp on the given
interface address for a few seconds, resolves every instance, prints JSON."""
import json
import sys
import time

from zeroconf import ServiceBrowser, ServiceListener, Zeroconf

TYPE = "_chat-service._tcp.local."


class Collect(ServiceListener):
    def __init__(self):
        self.names = set()

    def add_service(self, zc, type_, name):
        self.names.add(name)

    def update_service(self, zc, type_, name):
        self.names.add(name)

    def remove_service(self, zc, type_, name):
        self.names.discard(name)


def main():
    address, seconds = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    zc = Zeroconf(interfaces=[address])
    listener = Collect()
    ServiceBrowser(zc, TYPE, listener)
    time.sleep(seconds)
    found = []
    for name in sorted(listener.names):
        info = zc.get_service_info(TYPE, name, timeout=3000)
        if info is None:
            found.append({"name": name, "resolved": False})
            continue
        found.append({
            "name": name,
            "resolved": True,
            "port": info.port,
            "server": info.server,
            "addresses": info.parsed_addresses(),
            "txt": {k.decode(errors="replace"): (v.decode(errors="replace") if v is not None else None)
                    for k, v in (info.properties or {}).items()},
        })
    zc.close()
    print(json.dumps(found))


if __name__ == "__main__":
    main()
