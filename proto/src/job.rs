//! Job specs.
