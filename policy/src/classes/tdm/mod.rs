//! 2DCS-TDM, the two-level dynamic coscheduler with rigid time-division
//! multiplexing (the BE/RT coscheduling paper §4.2, Figure 3; admission
//! §4.4).
//!
//! - [`DivisionClock`]: the cluster-wide alternation of RT and BE divisions.
//! - [`decide`], [`TdmNode`]: which class runs on a node now, with lending.
//! - [`DivisionFallback`]: the node's own division clock when the
//!   coordinator's divisions stop arriving.
//! - [`allocate_rt`], [`allocate_be`]: initial allocation (also 2DCS-PS's).
//! - [`admit_deterministic`]: the paper's admission rule (also 2DCS-PS's).
//! - [`RtLoadModel`]: the load and capacity those rules compare, with the
//!   overheads the paper counts.

mod admission;
mod allocation;
mod division;
mod fallback;
mod load;
mod node;

pub use admission::admit_deterministic;
pub(crate) use admission::window_fit;
pub use allocation::{AllocationError, Laxity, allocate_be, allocate_rt};
pub(crate) use allocation::{Taken, check_spread, node_loads};
pub use division::{Division, DivisionClock, DivisionError};
pub use fallback::{DEFAULT_GRACE_PERIODS, DivisionFallback, DivisionSource};
pub use load::{DivisionCost, RtLoadModel};
pub use node::{ClassDecision, TdmEvent, TdmNode, decide, due_before_be_division_ends};
