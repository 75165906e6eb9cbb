//! `cargo fuzz run executor_event`: see `mesos_appliance::fuzzing::executor_event` for the input's
//! layout and the invariants checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mesos_appliance::fuzzing::executor_event(data));
