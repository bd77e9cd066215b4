"""LanchatKit's examples (Examples/) on the simulated LAN, each against a lanchatd on another host (issue 31).
The examples are built with everything else (`swift build`); discovery is real DNS-SD through each host's
avahi-daemon, the connections real TLS."""
import hashlib
import os
import re
import subprocess
import sys
import time

from testlan import BIN, read_line, wait_for, wait_process

HERE = os.path.dirname(os.path.abspath(__file__))


def example(lan, host, name, *args):
    return lan.popen(host, [os.path.join(BIN, name), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.STDOUT, text=True, bufsize=1)


def type_line(process, line):
    process.stdin.write(line + "\n")
    process.stdin.flush()


def test_terminal_chat_with_lanchatd(lan):
    lan.up(2)
    lan.start_daemon("h1", "alice")
    bob = example(lan, "h2", "lanchatkit-chat", "bob", "lab")
    read_line(bob.stdout, 20, "the chat's first line", match=lambda line: " in lab on port " in line)
    # Each finds the other through DNS-SD: lanchatd the library's advertisement, the library lanchatd's.
    read_line(bob.stdout, 30, "the chat finding alice", match=lambda line: line.startswith("* found alice"))
    wait_for(lambda: [p for p in lan.peers("h1") if p["name"] == "bob" and p["compatible"] and p["addresses"]],
             timeout=30, what="lanchatd finding the chat")

    # The chat invites lanchatd into its group; the person on h1 accepts with the command line.
    type_line(bob, "/invite alice")
    invitation = wait_for(lambda: lan.lanchat_json("h1", "invitations"), timeout=20, what="the chat's invitation")[0]
    assert invitation["from"] == "bob" and invitation["room"] == "lab" and invitation["message"] == "join lab"
    lan.lanchat("h1", "accept", invitation["id"])
    read_line(bob.stdout, 20, "the invitation accepted", match=lambda line: line.startswith("* alice accepted"))

    # Messages both ways, each signed by its author.
    lan.lanchat("h1", "send", "--room", "lab", "hello from alice")
    read_line(bob.stdout, 20, "alice's message", match=lambda line: line.strip() == "[lab] alice: hello from alice")
    type_line(bob, "hello from bob")
    report = read_line(bob.stdout, 20, "the send's report", match=lambda line: line.startswith("* sent to"))
    assert report.strip() == "* sent to 1 of 1"
    got = wait_for(lambda: [m for m in lan.lanchat_json("h1", "history", "--room", "lab")
                            if m["kind"] == "text" and m["text"] == "hello from bob"], timeout=20, what="bob's message on h1")
    assert got[0]["sender"] == "bob" and got[0]["signed"] is True
    type_line(bob, "/peers")
    assert read_line(bob.stdout, 10, "the connected peers", match=lambda line: line.startswith("* connected:")).strip() \
        == "* connected: alice"

    # lanchatd invites the chat into another group: the chat accepts by itself, and sees the short code.
    code = lan.lanchat_json("h1", "invite", "bob", "--room", "other", "--wait")
    assert code["outcome"] == "accepted"
    line = read_line(bob.stdout, 10, "the second invitation", match=lambda line: "invites you to other" in line)
    assert line.startswith("* alice invites you to other (code ")

    # End of input ends the chat: it exits 0 and its advertisement is withdrawn.
    bob.stdin.close()
    assert wait_process(bob, 15, "the chat to end at the end of its input") == 0
    wait_for(lambda: not [p for p in lan.peers("h1") if p["name"] == "bob" and p.get("origin") == "dnssd"
                          and p["state"] == "discovered"], timeout=20, what="the chat's advertisement withdrawn")


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_file_drop_with_lanchatd(lan):
    lan.up(3)
    lan.start_daemon("h1", "alice")
    source = os.path.join(lan.dir, "drop.bin")
    with open(source, "wb") as f:
        f.write(os.urandom(3 * 1024 * 1024 + 17))
    # The drop sends to whoever accepts: the person on h1 accepts with the command line.
    sender = example(lan, "h2", "lanchatkit-drop", "send", source)
    invitation = wait_for(lambda: lan.lanchat_json("h1", "invitations"), timeout=30, what="the drop's invitation")[0]
    assert invitation["room"] == "drop" and invitation["message"] == f"drop.bin ({3 * 1024 * 1024 + 17} bytes)"
    lan.lanchat("h1", "accept", invitation["id"])
    line = read_line(sender.stdout, 60, "the delivery", match=lambda line: line.startswith("delivered "))
    assert line.strip() == f"delivered drop.bin to alice: {3 * 1024 * 1024 + 17} bytes, SHA-256 checked"
    placed = [t for t in lan.lanchat_json("h1", "transfers") if t["direction"] == "incoming" and t["state"] == "complete"]
    assert len(placed) == 1 and sha256(placed[0]["path"]) == sha256(source)
    lan.run("h2", ["pkill", "-f", "lanchatkit-drop"])
    wait_process(sender, 15, "the drop sender to stop")

    # The other way: lanchatd invites the receiving drop on h3 and sends it a file.
    inbox = os.path.join(lan.dir, "inbox")
    receiver = example(lan, "h3", "lanchatkit-drop", "receive", inbox)
    read_line(receiver.stdout, 20, "the receiver's first line", match=lambda line: line.startswith("receiving into"))
    wait_for(lambda: [p for p in lan.peers("h1") if p["name"] == "h3" and p["addresses"]], timeout=30, what="alice finding h3")
    assert lan.lanchat_json("h1", "invite", "h3", "--room", "inbox", "--wait")["outcome"] == "accepted"
    lan.lanchat("h1", "send-file", "--to", "h3", source, timeout=120)
    line = read_line(receiver.stdout, 60, "the received file", match=lambda line: line.startswith("complete "))
    path = line.strip().split(": ", 1)[1]
    assert path.startswith(inbox + "/") and sha256(path) == sha256(source)
    lan.run("h3", ["pkill", "-f", "lanchatkit-drop"])


def test_sensor_publisher_and_subscriber_with_lanchatd(lan):
    lan.up(3)
    lan.start_daemon("h1", "alice")
    sensor = example(lan, "h2", "lanchatkit-sensor", "publish", "kitchen")
    read_line(sensor.stdout, 20, "the sensor's first line", match=lambda line: "publishing on sensors/readings" in line)
    wait_for(lambda: [p for p in lan.peers("h1") if p["name"] == "kitchen" and p["addresses"]], timeout=30, what="alice finding the sensor")
    # lanchatd joins the sensor's group and reads the readings with the command line.
    assert lan.lanchat_json("h1", "invite", "kitchen", "--room", "sensors", "--wait")["outcome"] == "accepted"
    reader = lan.popen("h1", [os.path.join(BIN, "lanchat"), "topic", "sub", "sensors", "readings"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    line = read_line(reader.stdout, 30, "a reading on lanchatd", match=lambda line: line.startswith("kitchen "))
    assert re.fullmatch(r"kitchen \d+\.\d C n=\d+", line.strip()), line
    # The library's subscriber finds the sensor by its discovery info, invites it, and reads it too.
    subscriber = example(lan, "h3", "lanchatkit-sensor", "subscribe")
    joined = read_line(subscriber.stdout, 30, "the sensor joining", match=lambda line: line.startswith("* kitchen"))
    assert joined.strip() == "* kitchen joined (unit C)"
    first = read_line(subscriber.stdout, 30, "a reading", match=lambda line: line.startswith("kitchen #"))
    second = read_line(subscriber.stdout, 10, "a second reading", match=lambda line: line.startswith("kitchen #"))
    assert int(second.split("#")[1].split(":")[0]) > int(first.split("#")[1].split(":")[0])
    for host in ("h1", "h2", "h3"):
        lan.run(host, ["pkill", "-f", "lanchatkit-sensor|topic sub"], check=False)


def test_a_library_advertiser_whose_name_stays_contested_takes_one_tagged_with_its_id(lan):
    """LanchatKit's Advertiser runs lanchatd's advertising loop (AdvertiseLoop): a host that answers every
    probe for "squat" and each "squat #N" keeps the name from it too, and after the contested-name wait
    (10 s) it is listed as "squat [first characters of its id]"."""
    lan.up(2)
    lan.add_host("evil", avahi=False)
    squatter = lan.popen("evil", [sys.executable, os.path.join(HERE, "mdns_raw.py"), lan.addr("evil"), "evil", "--contest", "squat", "20"],
                         stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)  # (its socket joined the group)
    lan.start_daemon("h1", "watcher")
    chat = example(lan, "h2", "lanchatkit-chat", "squat", "lab")
    read_line(chat.stdout, 20, "the chat's first line", match=lambda line: " in lab on port " in line)
    peer = wait_for(lambda: next((p for p in lan.peers("h1") if p["name"] == "squat" and p["addresses"]), None), timeout=40,
                    what="lanchatd listing the chat whose name is contested")
    assert re.fullmatch(r"squat \[[a-z2-7]{6}\]", peer["instance"]), peer
    assert peer["id"].startswith(peer["instance"][7:13]), peer
    read_line(squatter.stdout, 5, "the squatter to have answered for 'squat'", match=lambda line: line.strip() == "squat")
    chat.stdin.close()
    assert wait_process(chat, 15, "the chat to end at the end of its input") == 0
