#!/usr/bin/python3
"""A small network of network namespaces, for tests and by hand
(docs/TESTING.md): each host (rdzvd, a node, an etcd member) gets its own
namespace with one interface, eth0, on a bridge that lives in a namespace
of its own (the hub), so nothing of it touches this machine's interfaces
or routes. Addresses are 10.77.0.0/24, only inside; there is no route out.

    net = Net()                 # needs root
    a = net.add("n0")           # a Host: .ns, .addr, .wrap (ip netns exec)
    net.link_down("n0")         # the cable pulled: no FIN, no RST
    net.link_up("n0")
    net.cut("n0", ["rdzvd"])    # nftables: n0 and rdzvd no longer talk
    net.heal("n0")
    net.slow("n0", 100, 0.05)   # 100 ms each way, 5 % of frames dropped
    net.fast("n0")
    net.close()                 # every namespace, interface and relay gone

Names carry this process's pid (rz<pid><letter>-<host>), so runs side by
side never meet, and close() (also at exit) removes all of them; a later
run removes what a killed one left behind. The latency relay is relay.py
(this kernel has no sch_netem); checksum and segmentation offloads are off
on every link so that it can forward frames as they are.

Command line: netns.py up N [--tag T] (rdzvd and nodes n0..n(N-1)),
netns.py down [--tag T], netns.py list."""

import argparse
import atexit
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RELAY = os.path.join(HERE, "relay.py")
SUBNET = ipaddress.ip_network("10.77.0.0/24")
NAME_RE = re.compile(r"^rz(\d+)[a-z]+-")
_made = 0
_open = []


class Unavailable(Exception):
    """Namespaces cannot be made here (not root, no ip, no permission)."""


def run(*argv, check=True, timeout=15):
    r = subprocess.run([str(a) for a in argv], capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(map(str, argv)),
                                               r.returncode, r.stderr.strip()))
    return r


def namespaces():
    r = run("ip", "netns", "list", check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def sweep_stale():
    """Removes namespaces of runs whose process is gone."""
    for ns in namespaces():
        m = NAME_RE.match(ns)
        if m and not os.path.exists("/proc/%s" % m.group(1)):
            run("ip", "netns", "del", ns, check=False)
            shutil.rmtree("/etc/netns/" + ns, ignore_errors=True)


def usable():
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "nft", "ethtool"):
        if shutil.which(tool) is None:
            return "%s is not installed (deploy/install-deps.sh test)" % tool
    return None


class Host:
    def __init__(self, net, name, ns, addr):
        self.net, self.name, self.ns, self.addr = net, name, ns, addr
        self.iface = "eth0"
        self.wrap = ["ip", "netns", "exec", ns]

    def sh(self, *argv, check=True):
        return run(*(self.wrap + list(argv)), check=check)

    def __repr__(self):
        return "<Host %s %s in %s>" % (self.name, self.addr, self.ns)


class Net:
    def __init__(self, tag=None):
        global _made
        why = usable()
        if why:
            raise Unavailable(why)
        sweep_stale()
        # A run ended by SIGTERM (meson's timeout) still removes what it
        # made: the exit runs every finally and the atexit hook below.
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        if tag is None:
            _made += 1
            tag = "rz%d%s" % (os.getpid(), "abcdefghijklmnopqrstuvwxyz"[
                (_made - 1) % 26])
        self.tag = tag
        self.hosts = {}
        self.relays = {}
        self.cuts = set()
        self.hub = tag + "-hub"
        self._addrs = SUBNET.hosts()
        next(self._addrs)       # .1 is left for nothing: no gateway
        r = run("ip", "netns", "add", self.hub, check=False)
        if r.returncode != 0:
            raise Unavailable("cannot make a network namespace here: "
                              + r.stderr.strip())
        _open.append(self)
        try:
            self._hub("link", "set", "lo", "up")
            self._hub("link", "add", "br0", "type", "bridge")
            self._hub("link", "set", "br0", "up")
        except Exception:
            self.close()
            raise

    def _hub(self, *argv, check=True):
        return run("ip", "-n", self.hub, *argv, check=check)

    def _offloads_off(self, ns, dev):
        run("ip", "netns", "exec", ns, "ethtool", "-K", dev, "tx", "off",
            "rx", "off", "tso", "off", "gso", "off", "gro", "off",
            check=False)

    def add(self, name, hosts_file=None):
        """A host |name| (at most 8 characters): its namespace, eth0 on the
        bridge, the next address. |hosts_file|: the text of its own
        /etc/hosts (ip netns exec mounts /etc/netns/NS/hosts over it)."""
        assert re.fullmatch(r"[a-z0-9]{1,8}", name) and name not in self.hosts
        ns = "%s-%s" % (self.tag, name)
        addr = str(next(self._addrs))
        run("ip", "netns", "add", ns)
        h = Host(self, name, ns, addr)
        self.hosts[name] = h
        port = "v-" + name
        self._hub("link", "add", port, "type", "veth", "peer", "name", "eth0",
                  "netns", ns)
        self._hub("link", "set", port, "master", "br0", "up")
        run("ip", "-n", ns, "link", "set", "lo", "up")
        run("ip", "-n", ns, "addr", "add", "%s/%d" % (addr, SUBNET.prefixlen),
            "dev", "eth0")
        run("ip", "-n", ns, "link", "set", "eth0", "up")
        self._offloads_off(ns, "eth0")
        self._offloads_off(self.hub, port)
        if hosts_file is not None:
            os.makedirs("/etc/netns/" + ns, exist_ok=True)
            with open("/etc/netns/%s/hosts" % ns, "w") as f:
                f.write(hosts_file)
        return h

    def __getitem__(self, name):
        return self.hosts[name]

    # -- faults

    def link_down(self, name):
        """|name|'s link stops carrying anything, both ways, as a switch
        port or cable beyond the host would: no FIN or RST is sent and
        its eth0 keeps its carrier (its port leaves the bridge)."""
        port = "r-" + name if name in self.relays else "v-" + name
        self._hub("link", "set", "b-" + name if name in self.relays
                  else port, "nomaster")

    def link_up(self, name):
        self._hub("link", "set", "b-" + name if name in self.relays
                  else "v-" + name, "master", "br0")

    def cut(self, name, peers):
        """|name| and |peers| no longer reach each other (nftables in
        |name|'s namespace drops both ways); everyone else still does."""
        addrs = ", ".join(self.hosts[p].addr for p in peers)
        rules = ("table inet rzcut {\n"
                 " chain in { type filter hook input priority 0; "
                 "ip saddr { %s } drop; }\n"
                 " chain out { type filter hook output priority 0; "
                 "ip daddr { %s } drop; }\n}\n" % (addrs, addrs))
        h = self.hosts[name]
        self.heal(name)
        r = subprocess.run(h.wrap + ["nft", "-f", "-"], input=rules,
                           capture_output=True, text=True, timeout=15)
        if r.returncode != 0:
            raise RuntimeError("nft: " + r.stderr.strip())
        self.cuts.add(name)

    def heal(self, name):
        if name in self.cuts:
            self.hosts[name].sh("nft", "delete", "table", "inet", "rzcut",
                                check=False)
            self.cuts.discard(name)

    def slow(self, name, delay_ms, loss=0.0, seed=None):
        """|name|'s link through relay.py: |delay_ms| each way, |loss| of the
        frames each way dropped."""
        self.fast(name)
        port, a, b = "v-" + name, "r-" + name, "b-" + name
        self._hub("link", "set", port, "nomaster")
        self._hub("link", "add", a, "type", "veth", "peer", "name", b)
        self._hub("link", "set", b, "master", "br0", "up")
        self._hub("link", "set", a, "up")
        for dev in (port, a, b):
            self._offloads_off(self.hub, dev)
            self._hub("link", "set", dev, "promisc", "on")
        argv = ["ip", "netns", "exec", self.hub, "/usr/bin/python3", RELAY,
                "--delay", str(delay_ms), "--loss", str(loss), port, a]
        if seed is not None:
            argv += ["--seed", str(seed)]
        p = subprocess.Popen(argv, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        line = p.stdout.readline()
        if not line.startswith("relay "):
            p.kill()
            p.wait()
            raise RuntimeError("relay.py did not start: %s%s" %
                               (line, p.stdout.read()))
        self.relays[name] = p

    def fast(self, name):
        p = self.relays.pop(name, None)
        if p is None:
            return
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        self._hub("link", "del", "r-" + name, check=False)
        self._hub("link", "set", "v-" + name, "master", "br0", check=False)

    # -- the end

    def close(self):
        """Removes every relay, namespace (with its interfaces: deleting a
        namespace deletes its veth ends, and their peers with them) and
        hosts file of this network. Safe to call twice."""
        for name in list(self.relays):
            p = self.relays.pop(name)
            p.kill()
            p.wait()
        for h in list(self.hosts.values()):
            run("ip", "netns", "del", h.ns, check=False)
            shutil.rmtree("/etc/netns/" + h.ns, ignore_errors=True)
        self.hosts.clear()
        run("ip", "netns", "del", self.hub, check=False)
        if self in _open:
            _open.remove(self)

    def left_over(self):
        """Namespaces of this network that still exist (none after close)."""
        return [ns for ns in namespaces() if ns.startswith(self.tag + "-")]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@atexit.register
def _close_all():
    for net in list(_open):
        net.close()


def wait_for(cond, timeout, what, interval=0.05):
    """cond()'s first true value within |timeout| s, and the seconds it
    took; AssertionError naming |what| otherwise."""
    t0 = time.monotonic()
    while True:
        v = cond()
        if v:
            return v, time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise AssertionError("%s: not within %.1f s" % (what, timeout))
        time.sleep(interval)


def main():
    ap = argparse.ArgumentParser(description="a test network of namespaces")
    ap.add_argument("cmd", choices=("up", "down", "list"))
    ap.add_argument("n", nargs="?", type=int, default=3)
    ap.add_argument("--tag", default="rzcluster")
    o = ap.parse_args()
    if o.cmd == "list":
        for ns in namespaces():
            if ns.startswith(o.tag + "-") or NAME_RE.match(ns):
                print(ns)
        return
    if o.cmd == "down":
        for ns in namespaces():
            if ns.startswith(o.tag + "-"):
                run("ip", "netns", "del", ns, check=False)
                shutil.rmtree("/etc/netns/" + ns, ignore_errors=True)
        return
    net = Net(tag=o.tag)
    _open.remove(net)           # by hand: it stays up until `down`
    for name in ["rdzvd"] + ["n%d" % i for i in range(o.n)]:
        h = net.add(name)
        print("%-6s %-12s ip netns exec %s ..." % (name, h.addr, h.ns))


if __name__ == "__main__":
    try:
        main()
    except Unavailable as e:
        sys.exit("netns.py: %s" % e)
