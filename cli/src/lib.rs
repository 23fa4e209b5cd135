//! The `cosched` CLI's logic: argument parsing helpers and the tables it
//! prints (the binary only wires them to the admin client).
pub mod args;
pub mod attach;
pub mod node;
pub mod slurm;
pub mod tables;
pub mod timeline;
