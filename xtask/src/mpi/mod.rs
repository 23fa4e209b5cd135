//! Real MPI programs on namespace nodes: the two libraries Debian packages
//! (OpenMPI and MPICH), building our small benchmarks with each one's
//! `mpicc`, launching a job with each one's own launcher across the nodes,
//! and finding its ranks. Used by `cluster mpirun`, `bench mpi` and the MPI
//! integration tests.
//!
//! Debian's `mpirun`/`mpicc` alternatives point at one of the libraries, so
//! everything here calls the explicit names (`mpirun.openmpi`,
//! `mpiexec.hydra`, `mpicc.mpich`, ...).
//!
//! Modules: `build` (compiling `xtask/mpi/*.c`), `programs` (naming what
//! to run), `launch` (the launcher's command line and the remote-shell
//! script that enters a node), `job` (a running job, cleaned up on drop),
//! `ranks` (finding a job's ranks), `handoff` (the two ways ranks reach the
//! node agents), `output` (the programs' result lines).
pub mod build;
pub mod handoff;
pub mod job;
pub mod launch;
pub mod output;
pub mod programs;
pub mod ranks;

use serde::Serialize;

/// An MPI library as Debian packages it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Library {
    /// OpenMPI 4.1 (ob1 PML, TCP BTL), launched by `mpirun.openmpi`.
    Openmpi,
    /// MPICH 4.0 (ch4 device, UCX netmod over TCP), launched by hydra's
    /// `mpiexec.hydra`.
    Mpich,
}

impl Library {
    pub const ALL: [Library; 2] = [Library::Openmpi, Library::Mpich];

    pub fn as_str(self) -> &'static str {
        match self {
            Library::Openmpi => "openmpi",
            Library::Mpich => "mpich",
        }
    }

    /// The compiler wrapper.
    pub fn mpicc(self) -> &'static str {
        match self {
            Library::Openmpi => "mpicc.openmpi",
            Library::Mpich => "mpicc.mpich",
        }
    }

    /// The launcher.
    pub fn launcher(self) -> &'static str {
        match self {
            Library::Openmpi => "mpirun.openmpi",
            Library::Mpich => "mpiexec.hydra",
        }
    }

    /// The process the launcher starts on every node, whose children are
    /// the ranks.
    pub fn node_daemon(self) -> &'static str {
        match self {
            Library::Openmpi => "orted",
            Library::Mpich => "hydra_pmi_proxy",
        }
    }

    /// Whether the library has a mode in which a waiting rank yields the
    /// CPU. OpenMPI: `mpi_yield_when_idle` (sched_yield in its progress
    /// loop). MPICH's ch4 device has none: its one such setting,
    /// `MPIR_CVAR_POLLS_BEFORE_YIELD`, belongs to the ch3:nemesis device
    /// (set to 1 under ch4:ucx, a waiting rank still makes no sched_yield
    /// call; it polls with `epoll_wait(…, 0)`).
    pub fn has_yield_mode(self) -> bool {
        matches!(self, Library::Openmpi)
    }
}
