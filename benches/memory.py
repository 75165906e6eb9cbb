#!/usr/bin/env python3
"""Memory of one `mesos-appliance serve` replica, broken down.

Runs a real ZooKeeper (Debian's jar, as `tests/support/zookeeper.rs`), the
`mesos-testbed` release binary and one replica with N tasks (`sleep 3600`,
cpus 0.01, mem 1, services of at most 10,000 instances, as
`benches/harness/appliance.rs`), waits until all N run, asks for one
explicit reconciliation and waits for its end, then prints the replica's
`VmHWM`/`VmRSS` (`/proc/PID/status`) and its resident memory by mapping
(`/proc/PID/smaps`: the binary's text and data, the heap and anonymous
mappings, thread stacks), and `mntr`'s ZooKeeper data size and znode
count. With `--heaptrack` the replica runs under heaptrack (slower; for
the heap's breakdown by call site: `heaptrack_print FILE`).

    cargo build --release --bins
    python3 benches/memory.py 100 10000        # sizes
    MALLOC_ARENA_MAX=1 python3 benches/memory.py 100

Environment variables other than the ones above pass to the replica.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
RELEASE = os.path.join(TARGET, "release")
PER_SERVICE = 10_000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def post(url, body):
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST",
        headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def wait(what, probe, within):
    deadline = time.time() + within
    while time.time() < deadline:
        try:
            found = probe()
            if found:
                return found
        except Exception:
            pass
        time.sleep(0.2)
    raise SystemExit(f"timed out: {what}")


def zookeeper(tmp):
    port = free_port()
    data = os.path.join(tmp, "zk")
    os.makedirs(data)
    cfg = os.path.join(tmp, "zoo.cfg")
    with open(cfg, "w") as f:
        f.write(f"tickTime=500\ndataDir={data}\nclientPort={port}\n"
                "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
                "4lw.commands.whitelist=mntr,ruok\n")
    cp = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
    log = open(os.path.join(tmp, "zk.log"), "w")
    proc = subprocess.Popen(
        ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
         "-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain", cfg],
        stdout=log, stderr=log)
    wait("zookeeper", lambda: four_letters(port, "ruok") == "imok", 60)
    return proc, port


def four_letters(port, word):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(word.encode())
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out.decode()


def mntr(port):
    out = {}
    for line in four_letters(port, "mntr").splitlines():
        k, _, v = line.partition("\t")
        out[k] = v
    return out


def status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def smaps(pid, binary):
    """Resident KiB by kind of mapping."""
    kinds = {}
    current = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split()
                name = parts[5] if len(parts) > 5 else ""
                perms = parts[1]
                if name == binary or name.endswith("/mesos-appliance"):
                    current = f"binary {perms}"
                elif name == "[heap]":
                    current = "heap (brk)"
                elif name.startswith("["):
                    current = name
                elif name:
                    current = "libraries " + ("text" if "x" in perms else "data")
                else:
                    current = "anonymous"
            elif line.startswith("Rss:") and current:
                kinds[current] = kinds.get(current, 0) + int(line.split()[1])
    return kinds


def run(tasks, heaptrack):
    tmp = tempfile.mkdtemp(prefix="memory-")
    procs = []
    try:
        zk, zk_port = zookeeper(tmp)
        procs.append(zk)
        agents = max(100, -(-tasks // 250))
        testbed = subprocess.Popen(
            [os.path.join(RELEASE, "mesos-testbed"), "--port", "0", "--agents", str(agents)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ, "RUST_LOG": "warn"})
        procs.append(testbed)
        master = testbed.stdout.readline().decode().strip().rsplit(" ", 1)[-1]
        services = []
        for i in range(max(1, -(-tasks // PER_SERVICE))):
            services.append({"name": f"svc{i}", "command": "sleep 3600", "cpus": 0.01,
                             "mem": 1, "instances": min(PER_SERVICE, tasks - i * PER_SERVICE)})
        path = os.path.join(tmp, "services.json")
        with open(path, "w") as f:
            json.dump(services, f)
        port = free_port()
        binary = os.path.join(RELEASE, "mesos-appliance")
        args = [binary, "serve", "--zk", f"zk://127.0.0.1:{zk_port}/bench",
                "--zk-session-timeout", "4s", "--master", master,
                "--framework-name", "bench", "--framework-user", "root",
                "--deployment-id", "bench", "--services", path,
                "--reconcile-cooldown", "0s", "--listen", f"127.0.0.1:{port}"]
        if heaptrack:
            args = ["heaptrack", "-o", os.path.join(os.getcwd(), f"heaptrack.{tasks}")] + args
        log = open(os.path.join(tmp, "replica.log"), "w")
        started = time.time()
        replica = subprocess.Popen(args, stdout=log, stderr=log)
        procs.append(replica)
        api = f"http://127.0.0.1:{port}/api/v1"

        def running():
            s = get(f"{api}/state")
            return s["counts"]["tasks_by_state"].get("TASK_RUNNING", 0) >= tasks

        wait("all running", running, 120 + tasks * 0.02)
        launch = time.time() - started
        pid = replica.pid
        if heaptrack:
            pid = child_running(replica.pid, binary)
            # heaptrack's script waits for the replica: SIGTERM to the
            # script alone would leave the replica running.
            procs.append(ByPid(pid))
        before = status(pid)
        run_id = post(f"{api}/actions/reconcile", {"kind": "explicit"})
        wait("reconciled", lambda: reconciled(api, run_id), 120 + tasks * 0.01)
        st = status(pid)
        kinds = smaps(pid, binary)
        zk_stats = mntr(zk_port)
        print(f"\n== {tasks} tasks: all running in {launch:.1f} s ==")
        print(f"VmHWM {kb(st['VmHWM'])} KiB, VmRSS {kb(st['VmRSS'])} KiB "
              f"(after launch: HWM {kb(before['VmHWM'])} KiB), threads {st['Threads']}")
        for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]):
            if v >= 64:
                print(f"  {k:<28} {v:>8} KiB")
        print(f"ZooKeeper: approximate data size {zk_stats.get('zk_approximate_data_size')} B, "
              f"znodes {zk_stats.get('zk_znode_count')}")
        return int(kb(st["VmHWM"]))
    finally:
        for p in reversed(procs):
            try:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=20)
            except Exception:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def child_running(parent, binary):
    """The child of `parent` running `binary` (heaptrack starts its
    interpreter first, so the first child is not the replica)."""
    out = subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True).stdout
    for child in out.split():
        try:
            if os.path.realpath(f"/proc/{child}/exe") == os.path.realpath(binary):
                return int(child)
        except OSError:
            continue
    raise SystemExit(f"no child of {parent} runs {binary}")


class ByPid:
    """A process known by its ID alone, ended as `Popen` ones are."""

    def __init__(self, pid):
        self.pid = pid

    def send_signal(self, sig):
        os.kill(self.pid, sig)

    def wait(self, timeout):
        deadline = time.time() + timeout
        while os.path.exists(f"/proc/{self.pid}") and time.time() < deadline:
            time.sleep(0.1)

    def kill(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass


def reconciled(api, answer):
    run = get(f"{api}/actions/results/{answer['id']}").get("reconcile") or {}
    return run.get("finished_at") is not None and run


def kb(value):
    return value.split()[0]


def main():
    heaptrack = "--heaptrack" in sys.argv
    sizes = [int(a) for a in sys.argv[1:] if a.isdigit()] or [100]
    hwm = {n: run(n, heaptrack) for n in sizes}
    if len(sizes) > 1:
        ns = sorted(hwm)
        for a, b in zip(ns, ns[1:]):
            print(f"{a} → {b}: {(hwm[b] - hwm[a]) / (b - a) * 1024:.0f} B per added task")


if __name__ == "__main__":
    main()
