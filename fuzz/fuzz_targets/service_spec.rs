//! `cargo fuzz run service_spec`: see `mesos_appliance::fuzzing::service_spec` for the input's
//! layout and the invariants checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mesos_appliance::fuzzing::service_spec(data));
