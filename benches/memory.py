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
the heap's breakdown by call site: `heaptrack_print FILE`). With
`--callgrind` it runs under callgrind and the functions it ran are written
to `link/hot-symbols.txt`, the order `build.rs` links them in (see there):

    python3 benches/memory.py --callgrind 1000

    cargo build --release --bins
    python3 benches/memory.py 100 10000        # sizes
    MALLOC_ARENA_MAX=1 python3 benches/memory.py 100
    BENCH_APPLIANCE=/tmp/appliance-old python3 benches/memory.py 10000

`BENCH_APPLIANCE` names another `mesos-appliance` binary to measure (an
A/B against an older build); the testbed is still `target/release`'s.
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


def cpu_seconds(pid):
    """User and system CPU time of `pid` so far (`/proc/PID/stat`, clock ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def run(tasks, wrapper):
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
        binary = os.environ.get("BENCH_APPLIANCE") or os.path.join(RELEASE, "mesos-appliance")
        args = [binary, "serve", "--zk", f"zk://127.0.0.1:{zk_port}/bench",
                "--zk-session-timeout", "4s", "--master", master,
                "--framework-name", "bench", "--framework-user", "root",
                "--deployment-id", "bench", "--services", path,
                "--reconcile-cooldown", "0s", "--listen", f"127.0.0.1:{port}"]
        profile = os.path.join(os.getcwd(), f"callgrind.{tasks}.out")
        if wrapper == "heaptrack":
            args = ["heaptrack", "-o", os.path.join(os.getcwd(), f"heaptrack.{tasks}")] + args
        elif wrapper == "callgrind":
            args = ["valgrind", "--tool=callgrind", "--demangle=no", "--dump-instr=no",
                    "--compress-strings=no", f"--callgrind-out-file={profile}"] + args
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
        if wrapper == "heaptrack":
            pid = child_running(replica.pid, binary)
            # heaptrack's script waits for the replica: SIGTERM to the
            # script alone would leave the replica running.
            procs.append(ByPid(pid))
        before = status(pid)
        run_id = post(f"{api}/actions/reconcile", {"kind": "explicit"})
        wait("reconciled", lambda: reconciled(api, run_id), 120 + tasks * 0.01)
        if wrapper == "callgrind":
            # The dashboard's code is run too, so that it is listed.
            for page in PAGES:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}{page}", timeout=60).read()
                except Exception:
                    pass
        st = status(pid)
        kinds = smaps(pid, binary)
        zk_stats = mntr(zk_port)
        print(f"\n== {tasks} tasks: all running in {launch:.1f} s ==")
        print(f"VmHWM {kb(st['VmHWM'])} KiB, VmRSS {kb(st['VmRSS'])} KiB "
              f"(after launch: HWM {kb(before['VmHWM'])} KiB), threads {st['Threads']}, "
              f"CPU {cpu_seconds(pid):.2f} s")
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
        if wrapper == "callgrind" and os.path.exists(profile):
            write_hot_symbols(profile, binary)


HOT_SYMBOLS = os.path.join(ROOT, "link", "hot-symbols.txt")
PAGES = ["/", "/tasks", "/tasks/svc0.0", "/services", "/agents", "/offers", "/replicas",
         "/events", "/actions", "/audit", "/metrics", "/api/v1/state", "/api/v1/tasks"]


def write_hot_symbols(profile, binary):
    """Adds the binary's functions that ran (`fn=` entries of callgrind's
    uncompressed output under the binary's `ob=`), in the order callgrind
    lists them, to the ones `HOT_SYMBOLS` lists. Names are kept from
    earlier runs: `cargo build --release --bins` and `cargo bench` build
    the binary with different dependency features (dev-dependencies), so
    each function has a different mangled name in each; a list for both
    comes from one run on each binary (`BENCH_APPLIANCE`). Delete the file
    to start afresh."""
    hot, seen, in_binary = [], set(), False
    if os.path.exists(HOT_SYMBOLS):
        with open(HOT_SYMBOLS) as f:
            hot = [line.strip() for line in f if line.strip() and not line.startswith("#")]
        seen = set(hot)
    with open(profile, errors="replace") as f:
        for line in f:
            if line.startswith("ob="):
                in_binary = os.path.realpath(line[3:].strip()) == os.path.realpath(binary)
            elif line.startswith("fn=") and in_binary:
                name = line[3:].strip()
                # Unnamed code (`0x…`) and valgrind's own frames have no symbol.
                if name not in seen and not name.startswith(("0x", "(")):
                    seen.add(name)
                    hot.append(name)
    os.makedirs(os.path.dirname(HOT_SYMBOLS), exist_ok=True)
    with open(HOT_SYMBOLS, "w") as f:
        f.write("# The functions of mesos-appliance that a replica runs, written by\n"
                "# `python3 benches/memory.py --callgrind 1000` on the binaries of\n"
                "# `cargo build --release --bins` and `cargo bench`; build.rs links them\n"
                "# first (docs/benchmarks.md, \"Hot code first\"). Regenerate after\n"
                "# large changes; names that no longer exist are skipped.\n")
        f.write("\n".join(hot) + "\n")
    print(f"{len(hot)} functions listed in {HOT_SYMBOLS}")


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
    wrapper = next((w for w in ("heaptrack", "callgrind") if f"--{w}" in sys.argv), None)
    sizes = [int(a) for a in sys.argv[1:] if a.isdigit()] or [100]
    hwm = {n: run(n, wrapper) for n in sizes}
    if len(sizes) > 1:
        ns = sorted(hwm)
        for a, b in zip(ns, ns[1:]):
            print(f"{a} → {b}: {(hwm[b] - hwm[a]) / (b - a) * 1024:.0f} B per added task")


if __name__ == "__main__":
    main()
