//! muster admission webhook (work in progress).
