//! Unit tests of the daemon's handlers over the fake kernel.
