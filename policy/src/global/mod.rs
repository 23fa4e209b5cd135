//! Cluster-wide scheduling algorithms (filled in by the coordinator work).
