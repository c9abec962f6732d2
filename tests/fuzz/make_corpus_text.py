#!/usr/bin/python3
"""Writes the seed corpora of the text parsers' fuzz targets:
fuzz_endpoint.c, fuzz_parse.c, fuzz_pbs_nodes.c, fuzz_config.c,
fuzz_servers.c and fuzz_progress_msg.c.

    /usr/bin/python3 tests/fuzz/make_corpus_text.py

The files are committed; run it again only when an input layout changes.
Each file is one input in the layout its target describes at its top.
Inputs found by fuzzing are added next to these by hand, named regress-*,
and never regenerated.
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def endpoint():
    """Byte 0: 0x00 default port 0 and a 1-byte error buffer, 0x40 the
    default port and a tiny buffer, 0xc0 port 192 and a roomy buffer."""
    texts = {
        "host-port": "example.org:8080",
        "host": "node7.cluster",
        "ipv4": "10.0.0.1",
        "ipv4-port-max": "127.255.255.255:65535",
        "ipv4-port-zero": "127.0.0.1:0",
        "ipv6": "[::1]:29400",
        "ipv6-no-port": "[fe80::1%eth0]",
        "ipv6-mapped": "[::ffff:127.0.0.1]:5",
        "localhost": "localhost",
        "localhost-upper": "LOCALHOST:1",
        "unix": "unix:/run/rdzv/rdzvd.sock",
        "unix-relative": "unix:rdzvd.sock",
        "bad-empty-host": ":80",
        "bad-empty-port": "host:",
        "bad-port-range": "host:65536",
        "bad-port-sign": "host:-1",
        "bad-port-blank": "host: 1",
        "bad-port-leading-zeros": "host:0099",
        "bad-bare-ipv6": "::1",
        "bad-three-colons": "a:b:c",
        "bad-no-close": "[::1",
        "bad-after-close": "[::1]x",
        "bad-empty-brackets": "[]:1",
        "bad-unix-empty": "unix:",
        "bad-unix-long": "unix:/" + "x" * 120,
        "bad-host-long": "h" * 300 + ":1",
        "bad-bracket-host-long": "[" + "a" * 260 + "]",
        "empty": "",
    }
    files = {}
    for name, text in texts.items():
        for mode, byte in (("roomy", 0xc0), ("default", 0x40), ("tiny", 0x00)):
            if mode != "roomy" and not name.startswith("bad-") and \
                    name not in ("host", "ipv6-no-port"):
                continue
            files["%s-%s" % (name, mode)] = bytes([byte]) + text.encode()
    files["nul-inside"] = b"\xc0host:1\x00:2"
    return files


def parse():
    """Byte 0: the unit of a bare duration, 0 ms, 1 s, 2 min, 3 h."""
    texts = [
        ("size-bytes", "4194304"), ("size-k", "16k"), ("size-m", "4M"),
        ("size-kib", "512KiB"), ("size-gi", "1Gi"), ("size-gb", "2GB"),
        ("size-bad-suffix", "5B"), ("size-bad-lower-ib", "1kib"),
        ("size-overflow", "17179869184G"), ("size-max", "18446744073709551615"),
        ("dur-bare", "30"), ("dur-s", "30s"), ("dur-ms", "500ms"),
        ("dur-m", "5m"), ("dur-min", "2min"), ("dur-h", "1h"), ("dur-d", "7d"),
        ("dur-fraction", "1.5s"), ("dur-exponent", "1e3ms"),
        ("dur-hex", "0x1p4s"), ("dur-zero", "0"), ("dur-negative", "-1s"),
        ("dur-max", "4294967295s"), ("dur-over", "4294967296s"),
        ("dur-inf", "inf"), ("dur-infinity", "infinity"),
        ("dur-huge", "1e309"), ("dur-tiny", "1e-400"),
        ("dur-bad-unit", "5 s"), ("dur-blank", " 5s"), ("empty", ""),
    ]
    files = {}
    for i, (name, text) in enumerate(texts):
        files[name] = bytes([i % 4]) + text.encode()
    return files


def pbs_nodes():
    """Byte 0: the length of this host's name, which follows; then the
    node file."""
    def seed(host, text):
        return bytes([len(host)]) + host.encode() + text.encode()
    long_line = "n" * 600 + "\n"
    return {
        "slots": seed("node2", "node1\nnode1\nnode2\nnode2\nnode3\nnode3\n"),
        "fqdn": seed("node2.cluster", "node1.cluster\nnode2.cluster\n"),
        "short-name": seed("node3", "node1.example.com\nnode3.example.com\n"),
        "fqdn-host": seed("node1.example.com", "node1\nnode2\n"),
        "crlf-and-blanks": seed("b", "a\r\n\r\nb \t\n\nc np=4\n"),
        "not-listed": seed("elsewhere", "node1\nnode2\n"),
        "no-final-newline": seed("n2", "n1\nn2"),
        "long-line": seed("x", long_line + "x\n"),
        "empty-file": seed("node1", ""),
        "blank-lines": seed("node1", "\n\n \n\t\n"),
        "empty-host": seed("", "node1\n"),
        "many-hosts": seed("h57", "".join("h%d\nh%d\n" % (i, i)
                                           for i in range(100))),
        # Enough hosts for the hash of the hosts seen to grow many times,
        # each listed again after others (slots handed out round-robin).
        "thousands-of-hosts": seed("h1999", "".join(
            "h%d\n" % ((i * 7919) % 3000) for i in range(6000))),
    }


def config():
    with open(os.path.join(SOURCE_ROOT, "deploy", "rdzvd.conf.example"),
              "rb") as f:
        example = f.read()
    every = "\n".join([
        "listen = 127.0.0.1:29400",
        "listen = [::1]:1",
        "listen = unix:/tmp/rdzv.sock",
        "db = /var/lib/rdzv/rdzv.db",
        "tls-cert = /etc/rdzv/server.pem",
        "tls-key = /etc/rdzv/server.key",
        "tls-ca = /etc/rdzv/ca.pem",
        "insecure = yes",
        "log-level = debug",
        "admin = CN=ops,O=example",
        "admin = uid:0",
        "max-message = 4M",
        "max-streams = 100",
        "max-connections = 100000",
        "max-nodes-per-job = 10000",
        "retention = 7d",
        "keepalive = 5s",
        "shutdown-timeout = 500ms",
    ]) + "\n"
    return {
        "example": example,
        "every-setting": every.encode(),
        "empty": b"",
        "comments": b"; comment\n# comment\n\nlog-level = warn ; inline\n",
        "bom": b"\xef\xbb\xbflog-level = error\n",
        "multiline": b"admin = a\n  continued\n",
        "colon": b"log-level: info\n",
        "network-insecure": b"listen = 0.0.0.0:29400\n",
        "tls-half": b"tls-cert = /c.pem\n",
        "message-small": b"max-message = 512\n",
        "bad-unknown": b"port = 1\n",
        "bad-section": b"[rdzvd]\nlog-level = info\n",
        "bad-no-equals": b"insecure\n",
        "bad-values": b"insecure = maybe\nmax-message = 0\nmax-streams = -1\n"
                      b"retention = soon\nkeepalive = 5000000000\n"
                      b"log-level = loud\nlisten = a:b:c\n",
        "bad-after-good": b"db = /a\nadmin = x\nnope = 1\ndb = /b\n",
        "too-many-listen": b"".join(b"listen = 127.0.0.1:%d\n" % i
                                    for i in range(17)),
        "too-many-admins": b"".join(b"admin = uid:%d\n" % i
                                    for i in range(65)),
        "long-line": b"admin = " + b"a" * 300 + b"\n",
        "nul": b"log-level = info\x00\nadmin = a\n",
    }


def servers():
    """The list up to a NUL, then records: a byte (bit 0 a success, bit 1
    a hint follows up to the next NUL)."""
    fail, ok, hint = b"\x00", b"\x01", b"\x02"
    lists = {
        "one": b"127.0.0.1:29400",
        "three": b"a:29400,b:29400,c:29400",
        "mixed": b"rdzv-a, [::1]:29401,unix:/run/rdzv/rdzvd.sock,10.0.0.5",
        "sixteen": b",".join(b"h%d:1" % i for i in range(16)),
        "bad-seventeen": b",".join(b"h%d:1" % i for i in range(17)),
        "bad-empty-entry": b"a:1,,b:1",
        "bad-trailing-comma": b"a:1,",
        "bad-duplicate": b"a,a:29400",
        "bad-port": b"a:1,b:99999",
        "empty": b"",
    }
    files = {"list-" + k: v for k, v in lists.items()}
    files["rounds"] = lists["three"] + b"\x00" + fail * 7 + ok + fail * 3
    files["hint-to-leader"] = (lists["three"] + b"\x00" + hint +
                               b"c:29400\x00" + ok)
    files["hint-new-leader"] = (lists["one"] + b"\x00" + hint +
                                b"10.1.1.1:29400\x00" + fail + ok)
    files["hint-dead-leader"] = (lists["three"] + b"\x00" +
                                 (hint + b"dead:1\x00" + fail) * 6)
    files["hint-loop"] = (b"a:1,b:1\x00" +
                          (hint + b"b:1\x00" + hint + b"a:1\x00") * 5)
    files["hint-bad"] = (lists["three"] + b"\x00" + hint + b"a:b:c\x00" +
                         hint + b"\x00" + hint + b"[::1\x00" + fail)
    files["hint-full-list"] = (lists["sixteen"] + b"\x00" +
                               hint + b"x:1\x00" + ok)
    files["hints-fill-list"] = (lists["one"] + b"\x00" + b"".join(
        hint + b"n%d:1\x00" % i + ok for i in range(20)))
    return files


def progress_msg():
    """Workers' progress datagrams: what rdzv.progress sends and the usual
    ways to get it wrong."""
    return {
        "ok-zero": b"1 0 0",
        "ok-newline": b"1 3 1234\n",
        "ok-max": b"1 65535 18446744073709551615",
        "bad-overflow": b"1 0 18446744073709551616",
        "bad-rank": b"1 65536 5",
        "bad-version": b"2 0 5",
        "bad-nul": b"1 0 5\x00",
        "bad-space": b"1  0 5",
        "bad-sign": b"1 0 -5",
        "bad-crlf": b"1 0 5\r\n",
        "bad-long": b"1 0 " + b"0" * 100,
    }


def write(name, files):
    out = os.path.join(HERE, "corpus", name)
    os.makedirs(out, exist_ok=True)
    for fname, data in sorted(files.items()):
        if isinstance(data, str):
            data = data.encode()
        with open(os.path.join(out, fname), "wb") as f:
            f.write(data)
    print("%d files in %s" % (len(files), out))


def main():
    write("endpoint", endpoint())
    write("parse", parse())
    write("pbs_nodes", pbs_nodes())
    write("config", config())
    write("servers", servers())
    write("progress_msg", progress_msg())


if __name__ == "__main__":
    main()
