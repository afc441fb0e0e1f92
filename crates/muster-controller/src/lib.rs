//! muster controller (work in progress).
