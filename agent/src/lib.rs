//! cosched agent library.
pub mod ebpf;
