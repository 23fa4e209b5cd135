//! Coordinator <-> agent wire protocol (filled in by the coordinator work).
