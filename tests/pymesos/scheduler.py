"""A small pymesos scheduler run against mesos-testbed by tests/pymesos_client.rs.

It subscribes in JSON, takes the first offer to launch one task, waits for
TASK_RUNNING (pymesos acknowledges updates itself), asks for an implicit
reconciliation, and once that answer arrives tears the framework down.
Every step is printed as one line `STEP ...` for the Rust test to check.
"""
import logging
import sys
import threading

from addict import Dict
from pymesos import MesosSchedulerDriver, Scheduler


class OneTask(Scheduler):
    def __init__(self):
        self.launched = False
        self.running = False
        self.done = threading.Event()

    def registered(self, driver, framework_id, master_info):
        print("STEP registered", framework_id["value"], flush=True)

    def resourceOffers(self, driver, offers):
        for offer in offers:
            if self.launched:
                driver.declineOffer(offer.id, Dict(refuse_seconds=60))
                continue
            task = Dict()
            task.task_id.value = "pymesos-task-1"
            task.agent_id.value = offer.agent_id.value
            task.name = "pymesos task"
            task.command.value = "sleep 1000"
            task.resources = [
                dict(name="cpus", type="SCALAR", scalar={"value": 0.1}),
                dict(name="mem", type="SCALAR", scalar={"value": 32}),
            ]
            driver.launchTasks(offer.id, [task], Dict(refuse_seconds=5))
            self.launched = True
            print("STEP launched", offer.id.value, flush=True)

    def statusUpdate(self, driver, update):
        print("STEP update", update.task_id.value, update.state,
              update.get("source", ""), update.get("message", ""), flush=True)
        if update.state == "TASK_RUNNING" and not self.running:
            self.running = True
            driver.reconcileTasks([])
            print("STEP reconcile", flush=True)
        elif update.get("reason") == "REASON_RECONCILIATION":
            self.done.set()

    def error(self, driver, message):
        print("STEP error", message, flush=True)
        self.done.set()


def main():
    logging.basicConfig(level=logging.WARNING)
    master = sys.argv[1]
    framework = Dict()
    framework.user = "root"
    framework.name = "pymesos-check"
    framework.hostname = "localhost"
    framework.failover_timeout = 60
    scheduler = OneTask()
    driver = MesosSchedulerDriver(scheduler, framework, master, use_addict=True)
    driver.start()
    ok = scheduler.done.wait(30)
    driver.stop()  # failover=False: sends TEARDOWN
    driver.join()
    print("STEP stopped", ok, flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
