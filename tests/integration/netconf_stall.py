"""A NETCONF server that stops in the middle of a reply, run by sshd as the netconf subsystem
(tests/integration/test_netconf.py, the stalled-reply test). It speaks base:1.0 framing on
stdin/stdout, answers <edit-config> with <ok/> and <get-config> with empty data; once the
file STALL beside it exists, it sends the first half of its next <get-config> reply, writes
STALLED and goes silent until the client leaves. STALL_EDIT does the same to the next
<edit-config>'s reply (a batch that is still switching), writing EDIT_STALLED."""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(sys.argv[0]))
NS = "urn:ietf:params:xml:ns:netconf:base:1.0"
END = b"]]>]]>"


def stall(reply, mark):
    """Half of reply, then nothing until the client leaves."""
    sys.stdout.buffer.write(reply[:len(reply) // 2].encode())
    sys.stdout.buffer.flush()
    open(os.path.join(HERE, mark), "w").close()
    while os.read(0, 65536):
        pass  # silent until the client goes (sshd then closes our stdin)
    sys.exit(0)


def send(data):
    sys.stdout.buffer.write(data.encode() + END)
    sys.stdout.buffer.flush()


def messages():
    buf = b""
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            return
        buf += chunk
        while END in buf:
            msg, buf = buf.split(END, 1)
            yield msg.decode(errors="replace")


# ofcd's module, which the client loads from its yang_dir: what its edits are written in.
send(f'<hello xmlns="{NS}"><capabilities><capability>urn:ietf:params:netconf:base:1.0'
     '</capability><capability>urn:ietf:params:netconf:capability:writable-running:1.0'
     '</capability><capability>urn:ietf:params:xml:ns:netconf:base:1.0?module=ietf-netconf'
     '&amp;revision=2011-06-01&amp;features=writable-running'
     '</capability><capability>urn:ofcd:yang:optical-switch?module=ofcd-optical-switch'
     '&amp;revision=2026-11-26</capability></capabilities><session-id>1</session-id></hello>')
for msg in messages():
    m = re.search(r'message-id="([^"]*)"', msg)
    if not m:
        continue  # the client's hello
    head = f'<rpc-reply xmlns="{NS}" message-id="{m.group(1)}">'
    if "get-config" in msg:
        reply = head + "<data></data></rpc-reply>"
        if os.path.exists(os.path.join(HERE, "STALL")):
            stall(reply, "STALLED")
        send(reply)
    elif "edit-config" in msg and os.path.exists(os.path.join(HERE, "STALL_EDIT")):
        stall(head + "<ok/></rpc-reply>", "EDIT_STALLED")
    elif "close-session" in msg:
        send(head + "<ok/></rpc-reply>")
        break
    else:
        send(head + "<ok/></rpc-reply>")
