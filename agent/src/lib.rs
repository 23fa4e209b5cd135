//! cosched agent: the per-node daemon.
//!
//! Layout (data flows top to bottom):
//! - [`ebpf`], [`tracefs`]: loading the programs and reading their maps.
//! - [`kernel`]: the one seam to the kernel (real and fake).
//! - [`engine`]: the synchronous core (registry, policy, realisation plans).
//! - [`adoption`], [`wakeup`]: pure rules the engine applies (what may be
//!   adopted; what the eBPF side must report).
//! - [`registry`], [`restore`], [`enforce`], [`cpu_group`]: its parts.
//! - [`daemon`], [`launch`], [`control`], [`metrics`], [`config`], [`limits`]: the async edge.
//! - [`guardian`], [`lifeline`], [`threads`]: undoing everything when the agent dies.
//! - [`rt_frames`]: reading the frame counters real-time processes report
//!   through the `cosched-rt` client library; [`classes`]: BE and RT jobs
//!   together (frame accounting, the class overlay's decisions).
//! - [`coord`]: the optional link to the coordinator (gang slices, jobs);
//!   [`program`] and [`leftovers`] answer its program checks and reap orders.
pub mod adoption;
pub mod classes;
pub mod config;
pub mod control;
pub mod coord;
pub mod cpu_group;
pub mod daemon;
pub mod ebpf;
pub mod enforce;
pub mod engine;
pub mod guardian;
pub mod kernel;
pub mod launch;
pub mod leftovers;
pub mod lifeline;
pub mod limits;
pub mod low_latency;
pub mod metrics;
pub mod pidfd;
/// Moved to the policy crate (the simulator feeds its policies with it too).
pub use cosched_policy::driver as policy_driver;
pub mod program;
pub mod registry;
pub mod restore;
pub mod rt_frames;
pub mod threads;
pub mod tracefs;
pub use cosched_policy::driver::wakeup;
