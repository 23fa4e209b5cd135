//! Agent control socket protocol.
