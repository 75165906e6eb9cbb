//! `cargo fuzz run scheduler_event`: see `mesos_appliance::fuzzing::scheduler_event` for the input's
//! layout and the invariants checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mesos_appliance::fuzzing::scheduler_event(data));
