//! `mesos-testbed`: a stand-in Mesos master (placeholder).
