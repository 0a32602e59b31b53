"""tools/netns/netns_hosts.py - two "hosts" for tools/netns/multihost: network namespaces joined by one veth pair
(10.27.0.1 and 10.27.0.2; only those addresses and the namespaces' loopbacks are touched), each with its own host
name (a UTS namespace per process started) and an /etc/hosts naming both (`ip netns exec` mounts
/etc/netns/<name>/hosts over /etc/hosts). Names carry the creating process id, so parallel runs do not collide, and
reap_stale() removes what a killed earlier run left behind.
"""
import os
import re
import shutil
import signal
import subprocess

PREFIX = "bxnh"


def sh(*args, check=True):
    return subprocess.run(list(args), capture_output=True, text=True, check=check)


def reap_stale():
    """Namespaces (and their /etc/netns folders) left by runs of this script that died without cleaning up."""
    for line in sh("ip", "netns", "list", check=False).stdout.splitlines():
        m = re.match(rf"({PREFIX}(\d+)h\d)\b", line)
        if m and not os.path.exists(f"/proc/{m.group(2)}"):
            sh("ip", "netns", "del", m.group(1), check=False)
            shutil.rmtree(f"/etc/netns/{m.group(1)}", ignore_errors=True)
    for line in sh("ip", "-br", "link", check=False).stdout.splitlines():  # a veth killed before it moved
        m = re.match(rf"({PREFIX}(\d+)[vp]0)@", line)
        if m and not os.path.exists(f"/proc/{m.group(2)}"):
            sh("ip", "link", "del", m.group(1), check=False)


class Hosts:
    """Two namespaces host0/host1 (10.27.0.1, 10.27.0.2) joined by one veth pair; unique names per process."""

    def __init__(self):
        self.ns = [f"{PREFIX}{os.getpid()}h{i}" for i in range(2)]
        self.names = self.ns  # host names too (UTS namespaces), resolvable through /etc/netns/<ns>/hosts
        self.veth = [f"{PREFIX}{os.getpid()}v{i}" for i in range(2)]  # <= 15 characters for pids below 10^9
        self.addr = ["10.27.0.1", "10.27.0.2"]
        self.procs = []

    def __enter__(self):
        try:
            for i in range(2):
                sh("ip", "netns", "add", self.ns[i])
                os.makedirs(f"/etc/netns/{self.ns[i]}", exist_ok=True)
                with open(f"/etc/netns/{self.ns[i]}/hosts", "w") as f:
                    f.write("127.0.0.1 localhost\n" + "".join(f"{a} {n}\n" for a, n in zip(self.addr, self.names)))
            sh("ip", "link", "add", self.veth[0], "type", "veth", "peer", "name", self.veth[1])
            for i in range(2):
                sh("ip", "link", "set", self.veth[i], "netns", self.ns[i])
                sh("ip", "-n", self.ns[i], "addr", "add", self.addr[i] + "/24", "dev", self.veth[i])
                sh("ip", "-n", self.ns[i], "link", "set", self.veth[i], "up")
                sh("ip", "-n", self.ns[i], "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for i in range(2):
            self.kill_host(i)
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for i in range(2):
            sh("ip", "netns", "del", self.ns[i], check=False)  # takes its end of the veth pair (and so both) along
            shutil.rmtree(f"/etc/netns/{self.ns[i]}", ignore_errors=True)
        try:
            os.rmdir("/etc/netns")  # only when nothing else is in it
        except OSError:
            pass

    def start(self, i, argv, log, env=None):
        """argv on host i, as its own host name; stdout+stderr to log."""
        cmd = ["ip", "netns", "exec", self.ns[i], "unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', self.names[i]] + argv
        p = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=dict(os.environ, **(env or {})),
                             start_new_session=True)
        self.procs.append(p)
        return p

    def link(self, up):
        for i in range(2):
            sh("ip", "-n", self.ns[i], "link", "set", self.veth[i], "up" if up else "down")

    def kill_host(self, i):
        pids = sh("ip", "netns", "pids", self.ns[i], check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        return len(pids)

    def qdisc(self, *spec):
        """tc qdisc replace on both ends; False when the kernel lacks that qdisc."""
        ok = True
        for i in range(2):
            ok &= sh("ip", "netns", "exec", self.ns[i], "tc", "qdisc", "replace", "dev", self.veth[i], "root", *spec,
                     check=False).returncode == 0
        return ok

    def clear_qdisc(self):
        for i in range(2):
            sh("ip", "netns", "exec", self.ns[i], "tc", "qdisc", "del", "dev", self.veth[i], "root", check=False)


def netns_works():
    """None when everything the hosts need works here (ip netns add, a veth pair, a UTS namespace, /etc/netns),
    else the reason."""
    if os.geteuid() != 0:
        return "not root (ip netns and veth pairs need CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    if not shutil.which("ip") or not shutil.which("unshare"):
        return "iproute2's ip or util-linux's unshare is not installed"
    probe = f"{PREFIX}{os.getpid()}probe"
    r = sh("ip", "netns", "add", probe, check=False)
    sh("ip", "netns", "del", probe, check=False)
    if r.returncode != 0:
        return f"ip netns add fails here: {r.stderr.strip()}"
    r = sh("ip", "link", "add", f"{PREFIX}{os.getpid()}p0", "type", "veth", "peer", "name", f"{PREFIX}{os.getpid()}p1", check=False)
    sh("ip", "link", "del", f"{PREFIX}{os.getpid()}p0", check=False)
    if r.returncode != 0:
        return f"no veth pairs here: {r.stderr.strip()}"
    r = sh("unshare", "--uts", "true", check=False)
    if r.returncode != 0:
        return f"unshare --uts fails here: {r.stderr.strip()}"
    try:
        os.makedirs(f"/etc/netns/{probe}")
        os.rmdir(f"/etc/netns/{probe}")
    except OSError as e:
        return f"/etc/netns is not writable ({e}): the hosts' /etc/hosts files go there"
    return None
