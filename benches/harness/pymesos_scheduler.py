"""A minimal pymesos scheduler for benches/scheduler.rs (Python, no persistence).

Usage: python pymesos_scheduler.py <master host:port> <tasks>

It launches <tasks> tasks (cpus 0.01, mem 1, `sleep 3600`), as many per offer
as fit, lets pymesos acknowledge every update, and once all of them run asks
an explicit reconciliation of every task (task IDs only, as pymesos sends
them). It speaks the line protocol of benches/harness/clients.rs on stdout:
`running` when the last task runs, `reconciled <seconds>` when the last
answer arrives (seconds from just before the RECONCILE call), `phase <name>
<seconds>` (from its start) when it is subscribed, gets its first offers, has
placed every task and sees its first TASK_RUNNING, then waits to be killed.
"""
import logging
import sys
import threading
import time

from addict import Dict
from pymesos import MesosSchedulerDriver, Scheduler

CPUS_MILLIS = 10
MEM = 1
COMMAND = "sleep 3600"
STARTED = time.monotonic()


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def phase(name):
    say("phase %s %.3f" % (name, time.monotonic() - STARTED))


def scalar(offer, name):
    return sum(r.scalar.value for r in offer.resources if r.name == name)


class Bench(Scheduler):
    def __init__(self, n):
        self.n = n
        self.next = 0
        self.running = set()
        self.answered = set()
        self.reconcile_started = None
        self.offered = False

    def registered(self, driver, framework_id, master_info):
        phase("subscribed")

    def resourceOffers(self, driver, offers):
        if not self.offered:
            self.offered = True
            phase("offers")
        for offer in offers:
            fit = min(
                int(round(scalar(offer, "cpus") * 1000)) // CPUS_MILLIS,
                int(scalar(offer, "mem")) // MEM,
                self.n - self.next,
            )
            if fit <= 0:
                driver.declineOffer(offer.id)
                continue
            tasks = []
            for i in range(self.next, self.next + fit):
                task = Dict()
                task.task_id.value = "pymesos-%d" % i
                task.agent_id.value = offer.agent_id.value
                task.name = "pymesos-%d" % i
                task.command.value = COMMAND
                task.resources = [
                    dict(name="cpus", type="SCALAR", scalar={"value": CPUS_MILLIS / 1000}),
                    dict(name="mem", type="SCALAR", scalar={"value": MEM}),
                ]
                tasks.append(task)
            self.next += fit
            driver.launchTasks(offer.id, tasks)
            if self.next == self.n:
                phase("accepted")

    def statusUpdate(self, driver, update):
        task_id = update.task_id.value
        if update.get("reason") == "REASON_RECONCILIATION":
            if self.reconcile_started is not None and task_id not in self.answered:
                self.answered.add(task_id)
                if len(self.answered) == self.n:
                    say("reconciled %.3f" % (time.monotonic() - self.reconcile_started))
            return
        if update.state == "TASK_RUNNING":
            if task_id not in self.running:
                self.running.add(task_id)
                if len(self.running) == 1:
                    phase("first-running")
                if len(self.running) == self.n:
                    say("running")
                    self.reconcile_started = time.monotonic()
                    driver.reconcileTasks(
                        [Dict(task_id=Dict(value="pymesos-%d" % i)) for i in range(self.n)]
                    )
        elif update.state != "TASK_STARTING":
            sys.stderr.write("task %s is %s: %s\n" % (task_id, update.state, update.get("message", "")))

    def error(self, driver, message):
        sys.stderr.write("error: %s\n" % message)
        sys.exit(1)


def main():
    logging.basicConfig(level=logging.WARNING)
    master, n = sys.argv[1], int(sys.argv[2])
    framework = Dict()
    framework.user = "root"
    framework.name = "pymesos-bench"
    framework.hostname = "localhost"
    framework.failover_timeout = 60
    driver = MesosSchedulerDriver(Bench(n), framework, master, use_addict=True)
    driver.start()
    threading.Event().wait()


if __name__ == "__main__":
    main()
