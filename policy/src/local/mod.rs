//! Per-node coscheduling policies (filled in by the local-policy work).
