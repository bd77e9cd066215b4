"""LanchatKit's examples (Examples/) on the simulated LAN, each against a lanchatd on another host (issue 31).
The examples are built with everything else (`swift build`); discovery is real DNS-SD through each host's
avahi-daemon, the connections real TLS."""
import os
import subprocess

from testlan import BIN, read_line, wait_for, wait_process


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

    # End of input ends the chat: it withdraws its advertisement and says goodbye.
    bob.stdin.close()
    assert wait_process(bob, 15, "the chat to end at the end of its input") == 0
    wait_for(lambda: not [p for p in lan.peers("h1") if p["name"] == "bob" and p.get("origin") == "dnssd"
                          and p["state"] == "discovered"], timeout=20, what="the chat's advertisement withdrawn")
